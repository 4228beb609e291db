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
	run     func(ctx context.Context, args []string, io IO) error
}

// commands is filled by init functions in this package.
var commands = map[string]command{}

// Run runs the subcommand named by args[0].
func Run(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) error {
	std := IO{In: in, Out: out, Err: errw}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(out)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		usage(errw)
		return fmt.Errorf("unknown command %q: %w", args[0], errdefs.ErrInvalidArgument)
	}
	if err := c.run(ctx, args[1:], std); !errors.Is(err, errHelp) {
		return err
	}
	return nil
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
	io.WriteString(w, b.String())
}
