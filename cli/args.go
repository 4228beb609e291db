package cli

import (
	"github.com/spf13/cobra"
)

// annotCodeArgs marks a command whose arguments are code (exec, run):
// flags end at its first argument.
const annotCodeArgs = "sandlot:code-args"

// codeArgs makes cmd's flags end at its first argument, so code keeps its
// dashes (sandlot exec --lang bash ls -la).
func codeArgs(cmd *cobra.Command) {
	cmd.Flags().SetInterspersed(false)
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotCodeArgs] = "true"
}
