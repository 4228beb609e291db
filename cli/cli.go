// Package cli implements the sandlot subcommands on cobra. Each subcommand
// lives in its own file and adds its constructor to commands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/errdefs"
)

// IO is the standard streams of one invocation.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// ioOf is the streams cobra was given (Run sets them).
func ioOf(cmd *cobra.Command) IO {
	return IO{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
}

// commands are the constructors of the top-level subcommands, filled by
// init functions in this package. A fresh tree is built per Run, so flag
// values never leak from one invocation to the next.
var commands []func() *cobra.Command

// newRoot builds the command tree on std's streams.
func newRoot(std IO) *cobra.Command {
	root := &cobra.Command{
		Use:   "sandlot",
		Short: "sandboxes for AI agents: the daemon and its client",
		Long: "sandlot runs isolated, stateful sandboxes for AI agents (serve, mcp) and talks to them.\n\n" +
			"The daemon's settings are flags, SANDLOT_* variables or config-file keys (docs/configuration.md).\n" +
			"The client commands find their server by --url, $SANDLOT_URL or a context of the client config\n" +
			"(sandlot config add-context), and print tables, or JSON and YAML with -o json|yaml.",
		Example: `  sudo sandlot serve                                  # the daemon, on 127.0.0.1:7423
  sandlot exec --conversation demo 'print(1 + 1)'     # in another terminal, same directory
  sandlot config add-context local --api-key-file .sandlot/api-key   # then from anywhere
  sandlot shell --conversation demo`,
		Version:       versionLine(buildVersion()),
		SilenceErrors: true, // Main prints the one error line
		SilenceUsage:  true, // a mistake gets a hint, not the whole usage
	}
	root.SetIn(std.In)
	root.SetOut(std.Out)
	root.SetErr(std.Err)
	// --version prints the line `sandlot version` does.
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newVersionCmd())
	for _, newCmd := range commands {
		root.AddCommand(newCmd())
	}
	// cobra's completion command (bash, zsh, fish, powershell) behaves as
	// the other commands made of verbs: no shell named is a mistake.
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root {
		c.Args = cobra.NoArgs
		c.RunE = verbGroup("", "").RunE
		c.Example = `  source <(sandlot completion bash)
  sandlot completion zsh > "${fpath[1]}/_sandlot"`
		for _, sh := range c.Commands() {
			sh.Example = "  sandlot completion " + sh.Name() + " > sandlot." + sh.Name()
		}
	}
	return root
}

// Run runs the subcommand args name. Help goes to out and is no error. A
// mistake in the command line (unknown command or flag, wrong arguments)
// is a *usageError, invalid_argument.
func Run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	_, err := runTree(ctx, args, in, out, errw)
	return err
}

// runTree is Run, and the command that ran (or refused the command line).
func runTree(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) (*cobra.Command, error) {
	root := newRoot(IO{In: in, Out: out, Err: errw})
	// The command's own code starts after its flags and arguments were
	// accepted: an error before is the command line's.
	started := false
	root.PersistentPreRun = func(*cobra.Command, []string) { started = true }
	root.SetArgs(normalizeArgs(root, args))
	root.SetContext(ctx)
	cmd, err := root.ExecuteC()
	if err == nil || started {
		return cmd, err
	}
	if !errdefs.Categorized(err) {
		err = fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	return cmd, &usageError{err: err, path: cmd.CommandPath()}
}

// usageError is a command line cobra refused; Main adds where its help is.
type usageError struct {
	err  error
	path string
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// verbGroup is a command made of verbs (ctx ls, tenant create): without a
// verb it shows its usage on stderr and fails, an unknown verb is a usage
// error.
func verbGroup(use, short string, verbs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  unknownVerb,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Usage()
			return usageErr("%s: missing subcommand", cmd.Name())
		},
	}
	cmd.AddCommand(verbs...)
	return cmd
}

// unknownVerb refuses any argument of a command made of verbs: cobra
// found no verb by that name. It names the verbs the word is close to.
func unknownVerb(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only at the root
	}
	if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
		msg += " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return errors.New(msg)
}

func newVersionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "print the version, the commit it was built from and the store schema it knows",
		Args:    cobra.NoArgs,
		Example: "  sandlot version\n  sandlot version -o json",
	}
	var o output
	o.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		v := buildVersion()
		if o.structured() {
			return o.print(cmd.OutOrStdout(), v)
		}
		_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine(v))
		return err
	}
	return cmd
}
