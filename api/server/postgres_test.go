package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/postgres"
	"github.com/sandlot/sandlot/store/postgres/pgtest"
	"github.com/sandlot/sandlot/tenant"
)

// TestPostgresRLSFromRequest: on the Postgres store, what an authenticated
// request writes runs as the row-level-security role with app.tenant_id
// set to the request's tenant. A trigger on the RLS tables records the
// role and setting of every row written; the request creates a context
// (execution_contexts) and a guard finding (audit_events), and GET
// /v1/audit reads the finding back through the scoped store.
func TestPostgresRLSFromRequest(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.SchemaURL(t), postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Pool().Exec(ctx, `
CREATE TABLE rls_spy (tbl text, row_tenant text, setting text, role text);
GRANT INSERT ON rls_spy TO `+postgres.AppRole+`;
CREATE FUNCTION rls_spy_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO rls_spy VALUES (TG_TABLE_NAME, NEW.tenant_id, COALESCE(current_setting('app.tenant_id', true), ''), current_user);
  RETURN NEW;
END $$;
CREATE TRIGGER spy BEFORE INSERT OR UPDATE ON execution_contexts FOR EACH ROW EXECUTE FUNCTION rls_spy_fn();
CREATE TRIGGER spy BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION rls_spy_fn();`); err != nil {
		t.Fatal(err)
	}

	g, err := guard.New(guard.Config{Audit: func(ctx context.Context, ev guard.Event) {
		// As `sandlot serve` wires it: the request's ctx, so its tenant.
		if err := st.AppendAudit(context.WithoutCancel(ctx), store.AuditEvent{TenantID: ev.TenantID, Kind: audit.KindGuardFinding,
			Detail: map[string]string{"type": ev.Type, "hmac": ev.HMAC}}); err != nil {
			t.Errorf("append audit: %v", err)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	m := contexts.NewManager(st, contextstest.NewProvider(), contexts.Config{Guard: g})
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	key, _ := tenant.NewKey()
	tid := "rls-" + uuid.NewString()[:8]
	if err := st.CreateTenant(ctx, &tenant.Tenant{ID: tid, Name: tid, KeyPrefix: tenant.Prefix(key), GuardMode: tenant.GuardEnforce}, tenant.HashKey(key)); err != nil {
		t.Fatal(err)
	}
	h := server.New(server.Config{Contexts: m, Tools: noTools{}, Auth: tenant.NewAuthenticator(st, tenant.AuthConfig{}), Audit: st.ListAuditKind}).Handler()
	do := func(method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const files = "/v1/conversations/rls/paths/main/files?path=note.txt"
	if w := do("PUT", files, "mail bob.rls@exemplar.ie\n"); w.Code != 200 {
		t.Fatalf("upload: %d %s", w.Code, w.Body)
	}
	if w := do("GET", files, ""); w.Code != 200 || !strings.Contains(w.Body.String(), "[REDACTED:EMAIL]") {
		t.Fatalf("download: %d %s", w.Code, w.Body)
	}
	w := do("GET", "/v1/audit?kind="+audit.KindGuardFinding, "")
	var al api.AuditList
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &al) != nil || len(al.Events) == 0 || al.Events[0].TenantID != tid {
		t.Fatalf("audit: %d %s", w.Code, w.Body)
	}

	rows, err := st.Pool().Query(ctx, `SELECT tbl, row_tenant, setting, role FROM rls_spy`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for rows.Next() {
		var tbl, rowTenant, setting, role string
		if err := rows.Scan(&tbl, &rowTenant, &setting, &role); err != nil {
			t.Fatal(err)
		}
		seen[tbl]++
		if setting != tid || rowTenant != tid || role != postgres.AppRole {
			t.Errorf("%s row of tenant %q written as %s with app.tenant_id=%q, want %s and %q", tbl, rowTenant, role, setting, postgres.AppRole, tid)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen["execution_contexts"] == 0 || seen["audit_events"] == 0 {
		t.Fatalf("writes seen by the trigger: %v", seen)
	}
}
