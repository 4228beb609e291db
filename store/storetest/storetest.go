// Package storetest is the one conformance suite every store passes. A
// store's test calls Run with a function that opens a fresh, empty backend.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// base is a fixed clock reading with sub-millisecond digits, so the suite
// also checks that stores keep times at millisecond precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// Run runs the conformance suite. open must return a fresh, empty backend;
// Run closes it.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Backend)
	}{
		{"CreateGet", testCreateGet},
		{"CreateInvalid", testCreateInvalid},
		{"NotFound", testNotFound},
		{"UniqueActive", testUniqueActive},
		{"ConcurrentCreate", testConcurrentCreate},
		{"RecreateAfterTerminate", testRecreateAfterTerminate},
		{"Update", testUpdate},
		{"UpdateKeepsCounts", testUpdateKeepsCounts},
		{"RecordExecution", testRecordExecution},
		{"ConcurrentRecordExecution", testConcurrentRecordExecution},
		{"Touch", testTouch},
		{"Terminate", testTerminate},
		{"ConcurrentTerminate", testConcurrentTerminate},
		{"ListExpired", testListExpired},
		{"ListActiveCount", testListActiveCount},
		{"List", testList},
		{"Tenants", testTenants},
		{"TenantNames", testTenantNames},
		{"Keys", testKeys},
		{"Audit", testAudit},
		{"AuditBatch", testAuditBatch},
		{"AuditKind", testAuditKind},
		{"AuditRetention", testAuditRetention},
		{"TenantScope", testTenantScope},
		{"NodeColumn", testNodeColumn},
		{"Claim", testClaim},
		{"ConcurrentClaim", testConcurrentClaim},
		{"Heartbeat", testHeartbeat},
		{"Lease", testLease},
		{"ConcurrentLease", testConcurrentLease},
		{"Secrets", testSecrets},
		{"Templates", testTemplates},
		{"TemplateRebuild", testTemplateRebuild},
		{"Snapshots", testSnapshots},
		{"ForkSnapshots", testForkSnapshots},
		{"Lifecycle", testLifecycle},
		{"Suspend", testSuspend},
		{"ContextEnv", testContextEnv},
		{"ReservedMetadata", testReservedMetadata},
		{"Users", testUsers},
		{"Volumes", testVolumes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

// mixedCtx scopes every other caller of a race to tenant tn, so races mix
// system and tenant-scoped statements (which take different paths in a
// store with row-level security).
func mixedCtx(i int, tn string) context.Context {
	if i%2 == 1 {
		return tenant.WithID(context.Background(), tn)
	}
	return context.Background()
}

func ident(tn, conv, path string) contexts.Identity {
	return contexts.Identity{TenantID: tn, ConversationID: conv, PathID: path}
}

func newRec(id contexts.Identity) *contexts.Record {
	return &contexts.Record{
		Identity:   id,
		Provider:   "local",
		Template:   "python",
		CreatedAt:  base,
		LastUsedAt: base,
		ExpiresAt:  base.Add(30 * time.Minute),
	}
}

func mustCreate(t *testing.T, s store.Backend, rec *contexts.Record) *contexts.Record {
	t.Helper()
	if err := s.Create(context.Background(), rec); err != nil {
		t.Fatalf("Create(%+v): %v", rec.Identity, err)
	}
	return rec
}

func mustGet(t *testing.T, s store.Backend, id string) *contexts.Record {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func ids(recs []*contexts.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}
