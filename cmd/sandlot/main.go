// Command sandlot is the sandlot CLI and daemon.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandlot/sandlot/cli"
	"github.com/sandlot/sandlot/errdefs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		// The whole error: stderr is the operator's own terminal, and errors
		// from a server arrive already reduced to their public message.
		fmt.Fprintln(os.Stderr, "sandlot:", err)
	}
	os.Exit(errdefs.ExitCode(err))
}
