package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/telemetry/export"
)

func init() {
	commands = append(commands, newRunCmd)
}

// lrunStateDir keeps the CLI's sandboxes apart from a daemon's, whose
// reconcile would otherwise take them for orphans.
var lrunStateDir = filepath.Join(oci.DefaultStateDir, "cli")

const lrunLong = `Runs CODE in a fresh, isolated local sandbox, prints its output and
results, and destroys the sandbox. The exit status is 0 only when the code
succeeded.`

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run [flags] [CODE | --file F | -i]",
		Short: "run code in a fresh local sandbox (no server needed)",
		Long:  lrunLong,
		Example: `  sudo sandlot run 'print(1 + 1)'
  sudo sandlot run --lang bash 'uname -a; id'
  sudo sandlot run --file script.py -o json
  sudo sandlot run -i                      # a REPL; state persists between cells`,
	}
	codeArgs(cmd)
	fs := cmd.Flags()
	var f lrunFlags
	fs.StringVar(&f.lang, "lang", "", "python, javascript, typescript, bash, sh, r or java (default: from --file's extension, else python)")
	fs.StringVar(&f.runtime, "runtime", "auto", "OCI runtime: auto, crun, runc or runsc")
	fs.StringVar(&f.file, "file", "", "read the code from this file ('-' for stdin)")
	fs.BoolVar(&f.keep, "keep", false, "leave the sandbox running and print its id (reuse it with --sandbox; list with sandlot ps, destroy with sandlot prune)")
	fs.StringVar(&f.sandbox, "sandbox", "", "run in this kept sandbox instead of a fresh one (it stays unless --destroy)")
	fs.BoolVar(&f.destroy, "destroy", false, "with --sandbox: destroy the sandbox afterwards")
	fs.BoolVarP(&f.repl, "interactive", "i", false, "interactive: read cells from stdin (a line each; end a line with \\ to continue it), state persists")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "per-execution wall-clock limit (1s..600s)")
	fs.StringVar(&f.stateDir, "state-dir", lrunStateDir, "state directory of the CLI's sandboxes")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "log the runtime choice and timings to stderr")
	f.out.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return lrunMain(cmd.Context(), ioOf(cmd), args, f)
	}
	return cmd
}

// lrunFlags are run's flags.
type lrunFlags struct {
	lang, runtime, file, sandbox, stateDir string
	keep, destroy, repl, verbose           bool
	timeout                                time.Duration
	out                                    output // json, yaml: the result, for one run (not -i)
}

func lrunMain(ctx context.Context, std IO, args []string, f lrunFlags) error {
	if f.timeout < time.Second || f.timeout > 600*time.Second {
		return fmt.Errorf("run: --timeout must be between 1s and 600s: %w", errdefs.ErrInvalidArgument)
	}

	var code string
	switch {
	case f.repl:
		if f.file != "" || len(args) > 0 {
			return fmt.Errorf("run: -i takes no code: %w", errdefs.ErrInvalidArgument)
		}
		if f.out.structured() {
			return fmt.Errorf("run: -i is a session for people; -o json and yaml print one run's result: %w", errdefs.ErrInvalidArgument)
		}
	case f.file != "":
		if len(args) > 0 {
			return fmt.Errorf("run: both --file and CODE given: %w", errdefs.ErrInvalidArgument)
		}
		var b []byte
		var err error
		if f.file == "-" {
			b, err = io.ReadAll(std.In)
		} else {
			b, err = os.ReadFile(f.file)
		}
		if err != nil {
			return fmt.Errorf("run: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		code = string(b)
		if f.lang == "" {
			f.lang = lrunLangOf(f.file)
		}
	case len(args) > 0:
		code = strings.Join(args, " ")
	default:
		return fmt.Errorf("run: no code (sandlot run CODE, --file F or -i): %w", errdefs.ErrInvalidArgument)
	}
	if f.lang == "" {
		f.lang = agent.Python
	}
	switch f.lang {
	case agent.Python, agent.JavaScript, agent.TypeScript, agent.Bash, agent.Sh, agent.R, agent.Java:
	case "js", "node":
		f.lang = agent.JavaScript
	case "ts":
		f.lang = agent.TypeScript
	case "py":
		f.lang = agent.Python
	default:
		return fmt.Errorf("run: unknown language %q: %w", f.lang, errdefs.ErrInvalidArgument)
	}

	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(std.Err, &slog.HandlerOptions{Level: level, ReplaceAttr: export.Milliseconds}))
	start := time.Now()
	p, err := local.New(local.Config{Runtime: f.runtime, StateDir: f.stateDir, Logger: log})
	if err != nil {
		return err
	}
	var sb contexts.Sandbox
	if f.sandbox != "" {
		sb, err = p.Attach(ctx, f.sandbox)
	} else {
		sb, err = p.Create(ctx, contexts.Spec{Labels: map[string]string{"origin": "cli"}})
	}
	if err != nil {
		return err
	}
	log.Debug("sandbox attached", logkey.Sandbox, sb.ID(), logkey.Runtime, p.Runtime().Name(), logkey.Elapsed, time.Since(start))
	defer sb.Close()
	if (f.sandbox == "" && !f.keep) || (f.sandbox != "" && f.destroy) {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if derr := p.Destroy(dctx, sb.ID()); derr != nil {
				log.Warn("destroy sandbox", logkey.Sandbox, sb.ID(), logkey.Err, derr)
			}
		}()
	} else if f.sandbox == "" {
		fmt.Fprintf(std.Err, "sandbox: %s (kept: sandlot ps lists, sandlot prune destroys)\n", sb.ID())
	}

	exec := func(ctx context.Context, code string) error {
		p := agent.RunCodeParams{Language: f.lang, Code: code, TimeoutMs: f.timeout.Milliseconds(), Stream: true}
		if f.out.structured() {
			p.Stream = false
			return lrunStructured(ctx, sb, std, p, f.out)
		}
		return lrunOnce(ctx, sb, std, p)
	}
	if !f.repl {
		return exec(ctx, code)
	}
	return lrunREPL(ctx, std, f.lang, exec)
}

// lrunOnce runs one cell, streaming its output, and prints its results.
func lrunOnce(ctx context.Context, sb contexts.Sandbox, std IO, p agent.RunCodeParams) error {
	res, err := sb.RunCode(ctx, p, func(ev agent.OutputEvent) {
		switch ev.Stream {
		case agent.Stdout:
			io.WriteString(std.Out, ev.Data)
		case agent.Stderr:
			io.WriteString(std.Err, ev.Data)
		}
	})
	if err != nil {
		return err
	}
	for _, r := range res.Results {
		lrunPrintResult(std.Out, r)
	}
	if res.Truncated {
		fmt.Fprintln(std.Err, "[output truncated]")
	}
	if res.KernelRestarted {
		fmt.Fprintln(std.Err, "[kernel restarted: its state is gone]")
	}
	if res.Error != nil {
		if res.Error.Traceback != "" {
			fmt.Fprintln(std.Err, strings.TrimRight(res.Error.Traceback, "\n"))
		} else {
			fmt.Fprintf(std.Err, "%s: %s\n", res.Error.Name, res.Error.Value)
		}
	}
	if res.Success {
		return nil
	}
	switch {
	case res.TimedOut:
		return fmt.Errorf("code timed out after %d ms: %w", p.TimeoutMs, errdefs.ErrDeadlineExceeded)
	case res.Error != nil:
		return exitedWith(1, fmt.Errorf("code raised %s: %w", res.Error.Name, errdefs.ErrFailedPrecondition))
	default:
		return exitedWith(res.ExitCode, fmt.Errorf("code exited %d: %w", res.ExitCode, errdefs.ErrFailedPrecondition))
	}
}

// lrunStructured runs one cell and prints its whole result (-o json or
// yaml); the exit status is the code's, as without -o.
func lrunStructured(ctx context.Context, sb contexts.Sandbox, std IO, p agent.RunCodeParams, o output) error {
	res, err := sb.RunCode(ctx, p, nil)
	if err != nil {
		return err
	}
	if err := o.print(std.Out, res); err != nil {
		return err
	}
	switch {
	case res.Success:
		return nil
	case res.TimedOut:
		return fmt.Errorf("code timed out after %d ms: %w", p.TimeoutMs, errdefs.ErrDeadlineExceeded)
	case res.Error != nil:
		return exitedWith(1, fmt.Errorf("code raised %s: %w", res.Error.Name, errdefs.ErrFailedPrecondition))
	default:
		return exitedWith(res.ExitCode, fmt.Errorf("code exited %d: %w", res.ExitCode, errdefs.ErrFailedPrecondition))
	}
}

func lrunPrintResult(w io.Writer, r agent.RichResult) {
	switch { // a figure's text is only its repr: show the image instead
	case r.PNG != "":
		fmt.Fprintf(w, "[image/png, %d base64 bytes]\n", len(r.PNG))
	case r.JPEG != "":
		fmt.Fprintf(w, "[image/jpeg, %d base64 bytes]\n", len(r.JPEG))
	case r.SVG != "":
		fmt.Fprintf(w, "[image/svg+xml, %d bytes]\n", len(r.SVG))
	case r.Text != "":
		fmt.Fprintln(w, r.Text)
	case r.HTML != "":
		fmt.Fprintf(w, "[text/html, %d bytes]\n", len(r.HTML))
	case len(r.JSON) > 0:
		fmt.Fprintln(w, string(r.JSON))
	}
}

func lrunLangOf(file string) string {
	switch filepath.Ext(file) {
	case ".js", ".mjs", ".cjs":
		return agent.JavaScript
	case ".ts":
		return agent.TypeScript
	case ".sh", ".bash":
		return agent.Bash
	default:
		return agent.Python
	}
}
