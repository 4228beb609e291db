package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

func init() {
	commands = append(commands, newMCPCmd)
}

// mcpStateDir keeps MCP sessions' sandboxes apart from a daemon's, whose
// reconcile would otherwise take them for orphans (and the reverse).
var mcpStateDir = filepath.Join(oci.DefaultStateDir, "mcp")

// newMCPCmd is `sandlot mcp`: one MCP session on stdin/stdout with the
// daemon serve builds (daemon.New), without its front door. Stdout carries
// the protocol only: logs and the first-start key notice go to stderr. The
// session runs as one tenant (--tenant, or the default tenant); its
// conversation is the session unless a call names one.
func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "serve the tools over MCP on stdin/stdout (for MCP clients that start a command)", Args: cobra.NoArgs,
		Long: `Serves one MCP session on stdin and stdout with the daemon serve builds, on
the same default image (Debian, built from the mirror on the first start of
a data dir: minutes, once; until then tool calls answer that the sandbox is
being prepared). Give --data-dir an absolute path: MCP clients start the
command in a directory of their own. docs/tools.md has client
configurations to copy.`,
		Example: `  sandlot mcp --data-dir /var/lib/sandlot
  sandlot mcp --data-dir /var/lib/sandlot --tenant acme --conversation my-project
  # Claude Code:
  claude mcp add sandlot -- sudo /usr/local/bin/sandlot mcp --data-dir /var/lib/sandlot`}
	fs := cmd.Flags()
	var cfg serveConfig
	var tenantID, user, conversation string
	cfg.registerDaemon(fs, daemonDefaults{stateDir: mcpStateDir, logLevel: "warn", poolSize: 0})
	fs.StringVar(&tenantID, "tenant", "", "tenant (name or id) the session runs as (default: the tenant named default, or the only tenant)")
	fs.StringVar(&conversation, "conversation", "", "conversation of the session; name one to keep its sandbox across runs "+
		"(default: a new one, whose sandboxes end with the session)")
	fs.StringVar(&user, "user", "", "end user the session's calls are made for, unless a call's _meta names one (sandlot.dev/user); part of the sandbox's key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		if err := cfg.load(fs); err != nil {
			return err
		}
		diag := IO{In: std.In, Out: std.Err, Err: std.Err} // stdout belongs to the protocol
		log := newLogger(diag, cfg.logLevel)
		cfg.Logger, cfg.Stdio, cfg.Version = log, true, Version()
		logAliases(log, cfg.aliases)
		st, err := cfg.store.open(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		// The session's manager destroys sandboxes its store does not
		// know, so it must not share a state dir with a daemon or with
		// another session: New takes the state dir's lock.
		d, err := daemon.New(ctx, cfg.Config, st)
		if err != nil {
			return err
		}
		defer func() {
			// Detach: sandboxes keep running until their TTL, like after serve.
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			d.Close(cctx)
		}()
		if err := bootstrapTenant(ctx, st, cfg.DataDir, cfg.guardMode, cfg.bootstrapAdmin, diag); err != nil {
			return err
		}
		t, err := sessionTenant(ctx, st, tenantID)
		if err != nil {
			return err
		}
		err = d.ServeMCP(ctx, &sdk.IOTransport{Reader: io.NopCloser(std.In), Writer: nopWriteCloser{std.Out}}, t.ID, user, conversation)
		if ctx.Err() != nil {
			err = nil // interrupted: a normal end for a stdio server
		}
		return err
	}
	return cmd
}

// sessionTenant is the tenant whose id or name is id, or with id empty the
// tenant named "default" (created on first start), or the only tenant.
func sessionTenant(ctx context.Context, st store.Backend, id string) (*tenant.Tenant, error) {
	if id != "" {
		return findTenant(ctx, st, id)
	}
	ts, err := st.ListTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	for _, t := range ts {
		if t.Name == "default" {
			return t, nil
		}
	}
	if len(ts) == 1 {
		return ts[0], nil
	}
	return nil, fmt.Errorf("%d tenants and none named default; pass --tenant: %w", len(ts), errdefs.ErrInvalidArgument)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
