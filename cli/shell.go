package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
)

func init() {
	commands = append(commands, newShellCmd)
}

// newShellCmd is `sandlot shell`: an interactive bash in a conversation's
// context (the one run_code and files use), on the server's terminal
// route (GET .../shell). On a terminal the local one is raw while the
// session lasts, so keys (Ctrl-C, arrows, Tab) go to the remote shell,
// and its size follows the window. The exit status is the shell's.
func newShellCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shell (--conversation ID [--path P] | --context ID)",
		Short: "an interactive bash in a conversation's sandbox",
		Long: `Opens an interactive bash on a terminal in the context of a conversation path
(created when absent, as a tool call does) or of a context by id. Its files,
and the state run_code keeps, are the context's; the shell process ends with
the session, the context stays. Everything the terminal shows passes the
guard, as every tool's output does. The exit status is the shell's.`,
		Example: `  sandlot shell --conversation demo
  sandlot shell --conversation demo --path branch-b
  sandlot shell --context 461904e7-e85f-47c5-af3a-126bba2f7052
  echo 'ls -la; exit' | sandlot shell --conversation demo    # without a terminal`,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	var r remote
	r.registerServer(fs)
	var t client.FileTarget
	fs.StringVar(&t.ConversationID, "conversation", "", "the conversation whose context to open")
	fs.StringVar(&t.PathID, "path", "", "its path (default main)")
	fs.StringVar(&t.UserID, "user", "", "with --conversation: the end user whose conversation it is")
	fs.StringVar(&t.ContextID, "context", "", "a context by id (instead of --conversation)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if (t.ContextID == "") == (t.ConversationID == "") {
			return &usageError{err: usageErr("shell: give --conversation or --context"), path: cmd.CommandPath()}
		}
		return runShell(cmd.Context(), ioOf(cmd), r, t)
	}
	return cmd
}

func runShell(ctx context.Context, std IO, r remote, t client.FileTarget) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	in, _ := std.In.(*os.File)
	tty := in != nil && term.IsTerminal(int(in.Fd()))
	cols, rows := 0, 0
	if tty {
		cols, rows, _ = term.GetSize(int(in.Fd()))
	}
	sh, err := c.OpenShell(ctx, t, cols, rows)
	if err != nil {
		return err
	}
	defer sh.Close()
	if tty {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("shell: the terminal: %w", err)
		}
		defer term.Restore(int(in.Fd()), old)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if c, r, err := term.GetSize(int(in.Fd())); err == nil {
					sh.Resize(c, r)
				}
			}
		}()
	}
	// Without a terminal (stdin a pipe or /dev/null), input waits for the
	// shell's first output: bash on the remote terminal discards what
	// arrives before its line editor starts, and an end of input (^D) lost
	// that way would leave the session open forever.
	started := make(chan struct{})
	go func() {
		if !tty {
			select {
			case <-started:
			case <-ctx.Done():
				return
			}
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := std.In.Read(buf)
			if n > 0 && sh.Send(buf[:n]) != nil {
				return
			}
			if err != nil {
				sh.CloseStdin()
				return
			}
		}
	}()
	go func() {
		<-ctx.Done() // Ctrl-C without a terminal, or SIGTERM
		sh.Close()
	}()
	for {
		o, err := sh.Recv()
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, io.EOF):
			return fmt.Errorf("shell: the server closed the session: %w", errdefs.ErrUnavailable)
		case err != nil:
			return fmt.Errorf("shell: %v: %w", err, errdefs.ErrUnavailable)
		}
		switch o.Type {
		case api.ShellData:
			io.WriteString(std.Out, o.Data)
			select {
			case <-started:
			default:
				close(started)
			}
		case api.ShellExit:
			if o.ExitCode != 0 {
				return exitedWith(o.ExitCode, fmt.Errorf("shell exited %d: %w", o.ExitCode, errdefs.ErrFailedPrecondition))
			}
			return nil
		case api.ShellError:
			return &api.Error{Code: o.Code, Message: o.Message}
		}
	}
}
