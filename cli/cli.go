// Package cli implements the sandlot subcommands. Each subcommand lives in
// its own file and registers itself in commands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// IO is the standard streams of one invocation.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// command is one subcommand.
type command struct {
	summary string
	// usage and verbs belong to commands made of verbs (ctx ls, tenant
	// create): `sandlot CMD --help` prints usage, and completion offers
	// the verbs. Commands without verbs print their flags' usage.
	usage string
	verbs []string
	run   func(ctx context.Context, args []string, io IO) error
}

// commands is filled by init functions in this package.
var commands = map[string]command{}

// Run runs the subcommand named by args[0]. Help goes to out and is no
// error.
func Run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	std := IO{In: in, Out: out, Err: errw}
	if len(args) == 0 || isHelp(args[0]) {
		usage(out)
		return nil
	}
	switch args[0] {
	case "help":
		if len(args) > 1 {
			return Run(ctx, []string{args[1], "--help"}, in, out, errw)
		}
		usage(out)
		return nil
	case "version", "--version", "-version":
		fmt.Fprintf(out, "sandlot %s\n", Version())
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		usage(errw)
		return fmt.Errorf("unknown command %q (see sandlot --help): %w", args[0], errdefs.ErrInvalidArgument)
	}
	if c.usage != "" && len(args) > 1 && (isHelp(args[1]) || args[1] == "help") {
		io.WriteString(out, c.usage)
		return nil
	}
	if err := c.run(ctx, args[1:], std); !errors.Is(err, errHelp) {
		return err
	}
	return nil
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}

// errHelp ends a subcommand after its flags printed their usage (-h): the
// command does nothing and exits 0.
var errHelp = errors.New("help requested")

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: sandlot <command> [flags]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	b.WriteString("\n`sandlot <command> --help` shows a command's flags; `sandlot --version` the version.\n" +
		"The daemon's settings are flags, SANDLOT_* variables or config-file keys (docs/configuration.md).\n")
	io.WriteString(w, b.String())
}
