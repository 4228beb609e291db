package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
)

func init() {
	commands = append(commands, newExecCmd)
}

// newExecCmd streams the code's output as it happens. The exit status is
// the code's: 0 when it succeeded, its own when it exited nonzero, 1 when
// it raised; 5 (failed_precondition) when it timed out.
func newExecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exec [flags] CODE...   or   sandlot exec [flags] --file F",
		Short: "run code in a conversation's sandbox (python, javascript, typescript, bash, sh, r, java)",
		Example: `  sandlot exec 'print(1 + 1)'
  sandlot exec --conversation demo 'x = 41'
  sandlot exec --conversation demo 'print(x + 1)'      # state persists in the conversation
  sandlot exec --lang bash --conversation demo ls -la
  sandlot exec --file analysis.py -o json`,
	}
	codeArgs(cmd)
	fs := cmd.Flags()
	var r remote
	r.register(cmd)
	user := fs.String("user", "", "end user the call is made for (optional; part of the context's key)")
	conv := fs.String("conversation", "", "conversation id (default: a new one, printed on stderr)")
	path := fs.String("path", "", "path id (default main)")
	task := fs.String("task", "", "task id, used when there is no conversation id")
	lang := fs.String("lang", "python", "language: python, javascript, typescript, bash, sh, r, java (r and java: a template that has them)")
	file := fs.String("file", "", "read the code from a file (- for stdin)")
	timeout := fs.Duration("timeout", 0, "execution timeout, 1s to 10m (default: the server's)")
	tpl := fs.String("template", "", "template (name or id) when this call creates the context (default: the default template)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return runExec(cmd.Context(), ioOf(cmd), args, r, execFlags{user: *user, conv: *conv, path: *path, task: *task, lang: *lang, file: *file, timeout: *timeout, tpl: *tpl})
	}
	return cmd
}

type execFlags struct {
	user, conv, path, task, lang, file, tpl string
	timeout                                 time.Duration
}

func runExec(ctx context.Context, std IO, args []string, r remote, f execFlags) error {
	code := strings.Join(args, " ")
	switch {
	case f.file != "" && code != "":
		return usageErr("exec: give CODE or --file, not both")
	case f.file == "-":
		b, err := io.ReadAll(std.In)
		if err != nil {
			return fmt.Errorf("exec: read stdin: %w", err)
		}
		code = string(b)
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("exec: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		code = string(b)
	case code == "":
		return usageErr("exec: no code (sandlot exec CODE..., or --file F)")
	}
	req := client.RunCodeRequest{
		Target:   client.Target{UserID: f.user, ConversationID: f.conv, PathID: f.path, TaskID: f.task},
		Language: f.lang, Code: code, Timeout: f.timeout, Template: f.tpl,
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	var res *api.RunCodeResult
	if r.out.structured() {
		sp := startSpinner(std, "running", nil)
		res, err = c.RunCode(ctx, req)
		sp.stop()
		if err != nil {
			return err
		}
		if err := r.out.print(std.Out, res); err != nil {
			return err
		}
	} else {
		sp := startSpinner(std, "running", nil)
		res, err = c.RunCodeStream(ctx, req, func(ev api.Event) error {
			sp.stop()
			switch ev.Type {
			case api.EventStdout:
				io.WriteString(std.Out, ev.Data)
			case api.EventStderr:
				io.WriteString(std.Err, ev.Data)
			}
			return nil
		})
		sp.stop()
		if err != nil {
			return err
		}
		printResult(std, res)
		if f.conv == "" && f.task == "" {
			fmt.Fprintf(std.Err, "conversation: %s\n", res.ConversationID)
		}
	}
	if !res.Success {
		what := "failed"
		switch {
		case res.TimedOut:
			what = "timed out"
		case res.Error != nil:
			what = "raised " + res.Error.Name
		case res.ExitCode != 0:
			what = fmt.Sprintf("exited %d", res.ExitCode)
		}
		err := fmt.Errorf("code %s: %w", what, errdefs.ErrFailedPrecondition)
		if res.TimedOut {
			return err
		}
		return exitedWith(res.ExitCode, err)
	}
	return nil
}

// printResult shows what streaming did not: the value of the last
// expression and the error, Jupyter style.
func printResult(std IO, res *api.RunCodeResult) {
	for _, rr := range res.Results {
		switch {
		case rr.Main && rr.Text != "":
			fmt.Fprintln(std.Out, rr.Text)
		case rr.PNG != "" || rr.SVG != "" || rr.JPEG != "":
			fmt.Fprintln(std.Err, "[figure; use --json to get it]")
		}
	}
	if res.Error != nil {
		if res.Error.Traceback != "" {
			fmt.Fprintln(std.Err, strings.TrimRight(res.Error.Traceback, "\n"))
		} else {
			fmt.Fprintf(std.Err, "%s: %s\n", res.Error.Name, res.Error.Value)
		}
	}
	if res.TimedOut {
		fmt.Fprintf(std.Err, "timed out after %s\n", time.Duration(res.ExecutionTimeMs)*time.Millisecond)
	}
}
