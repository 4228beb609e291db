package cli

import (
	"strings"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
)

// normalizeArgs rewrites single-dash long flags (-json, -tenant=acme) as
// pflag's double-dash form, so command lines written for Go's flag
// package, as sandlot's were, keep working. A word is rewritten only when
// its name is a long flag of the command it reaches; one-letter flags and
// clusters of them (-i, -iv) are left to pflag, as are the words after
// "--" and, for commands whose arguments are code (exec, run), the words
// from the first argument on.
func normalizeArgs(root *cobra.Command, args []string) []string {
	out := make([]string, 0, len(args))
	cmd := root
	fs := flagsOf(cmd)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case strings.HasPrefix(a, "--"):
			out = append(out, a)
			if f := fs.Lookup(strings.TrimPrefix(a, "--")); f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
				i++ // the flag's value
				out = append(out, args[i])
			}
		case len(a) > 1 && a[0] == '-':
			name, _, hasValue := strings.Cut(a[1:], "=")
			if f := fs.Lookup(name); f != nil && len(name) > 1 {
				out = append(out, "-"+a)
				if !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
				continue
			}
			// One-letter flags, or unknown (pflag says which).
			out = append(out, a)
			if shorthandWantsNext(fs, a[1:]) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		default:
			out = append(out, a)
			if sub := subcommand(cmd, a); sub != nil {
				cmd, fs = sub, flagsOf(sub)
				continue
			}
			if cmd.Annotations[annotCodeArgs] != "" {
				return append(out, args[i+1:]...)
			}
		}
	}
	return out
}

// flagsOf is every flag cmd takes: its own, its parents' persistent ones,
// help and, at the root, version.
func flagsOf(cmd *cobra.Command) *flag.FlagSet {
	cmd.InitDefaultHelpFlag()
	if !cmd.HasParent() {
		cmd.InitDefaultVersionFlag()
	}
	fs := flag.NewFlagSet(cmd.Name(), flag.ContinueOnError)
	fs.AddFlagSet(cmd.Flags())
	fs.AddFlagSet(cmd.InheritedFlags())
	return fs
}

// subcommand is cmd's subcommand called name (or by an alias of it).
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

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

// shorthandWantsNext reports whether the cluster of one-letter flags
// (-iv, -t) ends in one whose value is the next word.
func shorthandWantsNext(fs *flag.FlagSet, cluster string) bool {
	for k := 0; k < len(cluster); k++ {
		f := fs.ShorthandLookup(cluster[k : k+1])
		if f == nil {
			return false
		}
		if f.NoOptDefVal == "" { // takes a value: the rest, or the next word
			return k == len(cluster)-1
		}
	}
	return false
}
