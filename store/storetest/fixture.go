package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store"
)

// The rows of the upgrade fixtures: each SQL store keeps, in its
// testdata, a database of every schema version as a daemon of that version
// left it (testdata/schema-NNNN.*), holding these rows in that version's
// columns, and its upgrade test opens each with today's binary and checks
// them with CheckFixture.
const (
	FixtureTenantID   = "11111111-1111-4111-8111-111111111111"
	FixtureTenantName = "acme"
	// FixtureKey is the tenant's API key; its SHA-256 is stored.
	FixtureKey       = "sk_fixture_0123456789abcdef"
	FixtureKeyPrefix = "sk_fixture_0"
	// FixtureKeyID is the key's id from schema 16 on (before, migration 16
	// gives it a random one).
	FixtureKeyID      = "key_fixture000001"
	FixtureLiveID     = "22222222-2222-4222-8222-222222222222"
	FixtureEndedID    = "33333333-3333-4333-8333-333333333333"
	FixtureConv       = "conv-1"
	FixtureTemplateID = "fixturetemplate00001"
	FixtureTemplate   = "py312"
	FixtureImage      = "sha256:6482171f705a36c7ec91df1d2b87e6e157bf9760f013d6664944a95a6b62403d"
	FixtureSource     = "docker.io/library/python:3.12-slim"
	// FixtureAuditKinds are the fixture's audit events, oldest first: one
	// of the tenant's, one of the system's.
	FixtureAuditKinds = "context.created,tenant.created"
	// FixtureTemplatesFrom is the first schema with templates (migration 5).
	FixtureTemplatesFrom = 5
)

// FixtureKeyHash is the stored hash of FixtureKey.
func FixtureKeyHash() string {
	h := sha256.Sum256([]byte(FixtureKey))
	return hex.EncodeToString(h[:])
}

// CheckFixture checks that s, opened on the fixture of schema version,
// has every row the fixture holds: the tenant found by its key, a live
// and an ended context with their identity and metadata, the audit
// events, and (from version 5) the tenant's template.
func CheckFixture(t *testing.T, s store.Backend, version int) {
	t.Helper()
	ctx := context.Background()
	ten, err := s.TenantByKeyHash(ctx, FixtureKeyHash())
	if err != nil || ten.ID != FixtureTenantID || ten.Name != FixtureTenantName || ten.KeyPrefix != FixtureKeyPrefix {
		t.Fatalf("tenant by key: %+v, %v", ten, err)
	}
	keys, err := s.ListKeys(ctx, FixtureTenantID)
	if err != nil || len(keys) != 1 || keys[0].Prefix != FixtureKeyPrefix || !strings.HasPrefix(keys[0].ID, "key_") ||
		(version >= 16 && (keys[0].ID != FixtureKeyID || keys[0].Name != "first")) {
		t.Fatalf("the tenant's keys: %v, %v", keys, err)
	}
	live, err := s.Get(ctx, FixtureLiveID)
	if err != nil {
		t.Fatalf("live context: %v", err)
	}
	if live.TenantID != FixtureTenantID || live.ConversationID != FixtureConv || live.PathID != "main" ||
		live.State != contexts.StateReady || live.SandboxID != "sb-1" || live.ExecutionCount != 3 || live.Metadata["team"] != "blue" {
		t.Errorf("live context: %+v", live)
	}
	active, err := s.GetActive(ctx, contexts.Identity{TenantID: FixtureTenantID, ConversationID: FixtureConv, PathID: "main"})
	if err != nil || active.ID != FixtureLiveID {
		t.Errorf("GetActive of the live context's identity: %+v, %v", active, err)
	}
	ended, err := s.Get(ctx, FixtureEndedID)
	if err != nil || ended.State != contexts.StateTerminated || ended.Reason != contexts.ReasonExpired || ended.TerminatedAt == nil {
		t.Errorf("ended context: %+v, %v", ended, err)
	}
	evs, err := s.ListAudit(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i := len(evs) - 1; i >= 0; i-- {
		kinds = append(kinds, evs[i].Kind)
	}
	if got := strings.Join(kinds, ","); got != FixtureAuditKinds {
		t.Errorf("audit kinds %q, want %q", got, FixtureAuditKinds)
	}
	if mine, err := s.ListAudit(ctx, FixtureTenantID, 0); err != nil || len(mine) != 1 || mine[0].ContextID != FixtureLiveID {
		t.Errorf("the tenant's audit: %+v, %v", mine, err)
	}
	if version < FixtureTemplatesFrom {
		return
	}
	tpl, err := s.GetTemplate(ctx, FixtureTenantID, FixtureTemplate)
	if err != nil || tpl.ID != FixtureTemplateID || tpl.Image != FixtureImage || tpl.Source != FixtureSource || tpl.Settings.Resources.MemoryBytes != 1<<30 {
		t.Errorf("template: %+v, %v", tpl, err)
	}
}
