package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
	"github.com/sandlot/sandlot/mcp"
	"github.com/sandlot/sandlot/tenant"
)

// ServeMCP serves one MCP session on t (`sandlot mcp`: stdin and stdout)
// as the tenant tenantID until the client leaves or ctx ends. The
// session's conversation is conversation, or with "" a new one that
// nobody can name again, whose contexts end with the session rather than
// at their TTL. A call may still name another conversation. user is the
// end user of calls whose _meta names none ("" is no user); the contexts
// of an ephemeral conversation end whoever's they are, since only this
// session knows its id.
func (d *Daemon) ServeMCP(ctx context.Context, t sdk.Transport, tenantID, user, conversation string) error {
	ephemeral := conversation == ""
	if ephemeral {
		conversation = uuid.NewString()
	}
	srv := mcp.New(d.tools, mcp.Config{Tenant: tenantID, Tenants: d.auth, User: user, Conversation: conversation, Logger: d.log, Version: d.version()})
	err := srv.Run(ctx, t)
	if ephemeral {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		if terr := d.endConversation(cctx, tenantID, conversation); terr != nil {
			d.log.Warn("ending the session's contexts", logkey.Err, terr.Error())
		}
	}
	return err
}

// endConversation terminates the active contexts of one conversation.
func (d *Daemon) endConversation(ctx context.Context, tenantID, conversation string) error {
	recs, err := d.manager.List(tenant.WithID(ctx, tenantID), contexts.Filter{TenantID: tenantID, ConversationID: conversation,
		States: []contexts.State{contexts.StateCreating, contexts.StateReady}})
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range recs {
		if err := d.manager.Terminate(ctx, tenantID, rec.ID, contexts.ReasonDeleted); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// version is the version MCP clients, the landing page and /v1/version
// are told (Config.Version).
func (d *Daemon) version() string { return d.buildVersion().Version }
