// Command sandlot is the sandlot CLI and daemon.
package main

import (
	"context"
	"os"

	"github.com/sandlot/sandlot/cli"
)

func main() {
	ctx, stop := cli.SignalContext(context.Background())
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
