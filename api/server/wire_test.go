package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/audit"
)

// TestWireForms: api's wire types are the wire's own, converted from the
// daemon's at the edge; each pair must encode to the same JSON, so the
// /v1 bodies did not change when api stopped embedding the daemon's
// types. Every field is set, so a tag renamed on one side shows.
func TestWireForms(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	end := at.Add(time.Hour)
	rec := &contexts.Record{
		ID: "ctx-1", Identity: contexts.Identity{TenantID: "t", ConversationID: "c", PathID: "p"},
		State: contexts.StateTerminated, Reason: contexts.ReasonMerged, SandboxID: "sb", Provider: "local", Template: "default",
		CreatedAt: at, LastUsedAt: at, ExpiresAt: at, TerminatedAt: &end, ExecutionCount: 3, TotalExecutionTimeMs: 40,
		LastError: "boom", ResourceUsage: contexts.ResourceUsage{MemoryBytes: 1, CPUTimeMs: 2, DiskBytes: 3, PIDs: 4},
		Metadata: map[string]string{"k": "v"}, Node: "n1",
	}
	rr := agent.RichResult{Main: true, Text: "t", HTML: "h", Markdown: "m", SVG: "s", PNG: "p", JPEG: "j", LaTeX: "l",
		JSON: json.RawMessage(`{"a":1}`), JavaScript: "js", Data: json.RawMessage(`{"c":[1]}`)}
	ee := agent.ExecError{Name: "ValueError", Value: "v", Traceback: "tb"}
	fi := agent.FileInfo{Name: "a", Path: "/home/user/a", Type: "symlink", Size: 1, Mode: 0o644, ModTime: 5, Owner: "u", Group: "g", Target: "b"}
	ev := audit.Event{ID: 7, TenantID: "t", ContextID: "c", Kind: audit.KindGuardFinding, Detail: map[string]string{"type": "EMAIL"}, At: at}
	for _, tc := range []struct {
		name         string
		daemon, wire any
	}{
		{"context", rec, server.ContextOf(rec)},
		{"rich result", rr, api.RichResult(rr)},
		{"exec error", ee, api.ExecError(ee)},
		{"file info", fi, api.FileInfo(fi)},
		{"audit event", ev, api.AuditEvent(ev)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.daemon)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tc.wire)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("wire JSON differs from the daemon's (-daemon +wire):\n%s", diff)
			}
		})
	}
	if api.DefaultPathID != contexts.DefaultPath {
		t.Errorf("api.DefaultPathID %q, contexts.DefaultPath %q", api.DefaultPathID, contexts.DefaultPath)
	}
}

// TestContextNetworkWire: a context's network policy reaches the wire
// with its rules and header names, and never a header's value (a value
// may be a credential the tenant gave the proxy).
func TestContextNetworkWire(t *testing.T) {
	const secret = "Bearer sk-live-0123456789"
	allow, err := policy.ParseRule("api.example.org:443,8443")
	if err != nil {
		t.Fatal(err)
	}
	rec := &contexts.Record{ID: "ctx-1", Identity: contexts.Identity{TenantID: "t", ConversationID: "c", PathID: "p"}, State: contexts.StateReady}
	rec.Network = &policy.Policy{Mode: policy.Allowlist, Allow: []policy.Rule{allow},
		Headers: []policy.HeaderRule{{Host: "api.example.org", Headers: map[string]string{"X-B": "b", "Authorization": secret}}},
		Ingress: policy.Ingress{Public: true}, Secrets: []string{"gh-token"}}
	got := server.ContextOf(rec).Network
	want := &api.ContextNetwork{Mode: "allowlist", Allow: []string{"api.example.org:443,8443"},
		Headers: []api.ContextNetworkHeads{{Host: "api.example.org", Names: []string{"Authorization", "X-B"}}},
		Ingress: api.NetworkIngress{Public: true}, Secrets: []string{"gh-token"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("network (-want +got):\n%s", d)
	}
	b, _ := json.Marshal(server.ContextOf(rec))
	if strings.Contains(string(b), "sk-live") {
		t.Fatalf("a header value on the wire: %s", b)
	}
	if server.ContextOf(&contexts.Record{}).Network != nil {
		t.Fatal("a context without a network has one on the wire")
	}
}
