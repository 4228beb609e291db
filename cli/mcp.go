package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

func init() {
	commands = append(commands, newMCPCmd)
}

// runMCP serves one MCP session on stdin/stdout with the same store,
// provider, guard and manager as `serve` (see wire). Stdout carries the
// protocol only: logs and the first-start key notice go to stderr. The
// session runs as one tenant (--tenant, or the default tenant); its
// conversation is the session unless a call names one.
// mcpStateDir keeps MCP sessions' sandboxes apart from a daemon's, whose
// reconcile would otherwise take them for orphans (and the reverse).
var mcpStateDir = filepath.Join(oci.DefaultStateDir, "mcp")

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "serve the tools over MCP on stdin/stdout (for MCP clients that start a command)", Args: cobra.NoArgs}
	fs := cmd.Flags()
	var cfg serveConfig
	var tenantID, conversation string
	cfg.registerDaemon(fs, daemonDefaults{stateDir: mcpStateDir, logLevel: "warn", poolSize: 0})
	fs.StringVar(&tenantID, "tenant", "", "tenant id the session runs as (default: the tenant named default, or the only tenant)")
	fs.StringVar(&conversation, "conversation", "", "conversation of the session; name one to keep its sandbox across runs "+
		"(default: a new one, whose sandboxes end with the session)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		if err := cfg.load(fs); err != nil {
			return err
		}
		diag := IO{In: std.In, Out: std.Err, Err: std.Err} // stdout belongs to the protocol
		log := newLogger(diag, cfg.logLevel)
		if usesLocal(cfg.providers) {
			// The session's manager destroys sandboxes its store does not
			// know, so it must not share a state dir with a daemon or with
			// another session.
			unlock, err := lockStateDir(cfg.stateDir)
			if err != nil {
				return err
			}
			defer unlock()
		}
		node, err := resolveNode(cfg.node, cfg.store.dataDir, cfg.stateDir, mcpStateDir)
		if err != nil {
			return err
		}
		cfg.node = node

		st, err := cfg.store.open(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := bootstrapTenant(ctx, st, cfg.store.dataDir, cfg.guardMode, cfg.bootstrapAdmin, diag); err != nil {
			return err
		}
		t, err := sessionTenant(ctx, st, tenantID)
		if err != nil {
			return err
		}
		w, err := wire(ctx, cfg, st, log)
		if err != nil {
			return err
		}
		defer func() {
			// Detach: sandboxes keep running until their TTL, like after serve.
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w.close(cctx)
		}()
		ephemeral := conversation == ""
		if ephemeral {
			conversation = uuid.NewString()
		}
		srv := mcp.New(w.tools, mcp.Config{Tenant: t.ID, Tenants: w.auth, Conversation: conversation, Logger: log})
		err = srv.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(std.In), Writer: nopWriteCloser{std.Out}})
		if ctx.Err() != nil {
			err = nil // interrupted: a normal end for a stdio server
		}
		if ephemeral {
			// Nobody can name this conversation again: end its contexts now
			// rather than leave them to the TTL.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
			defer cancel()
			if terr := endConversation(cctx, w, t.ID, conversation); terr != nil {
				log.Warn("ending the session's contexts", logkey.Err, terr.Error())
			}
		}
		return err
	}
	return cmd
}

// endConversation terminates the active contexts of one conversation.
func endConversation(ctx context.Context, w *wired, tenantID, conversation string) error {
	recs, err := w.manager.List(tenant.WithID(ctx, tenantID), contexts.Filter{TenantID: tenantID, ConversationID: conversation,
		States: []contexts.State{contexts.StateCreating, contexts.StateReady}})
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range recs {
		if err := w.manager.Terminate(ctx, tenantID, rec.ID, contexts.ReasonDeleted); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sessionTenant is the tenant named id, or with id empty the tenant named
// "default" (created on first start), or the only tenant.
func sessionTenant(ctx context.Context, st store.Backend, id string) (*tenant.Tenant, error) {
	if id != "" {
		t, err := st.GetTenant(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", id, err)
		}
		return t, nil
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
