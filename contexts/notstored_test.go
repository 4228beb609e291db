package contexts_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/store/sqlite"
)

// TestSecretsAndOutputNotStored (000 §5.4): after calls that declare a
// secret, print it and other output (an e-mail address the guard finds and
// audits) and fail with the secret in the error, the store holds none of
// them: the SQLite database's bytes (file and write-ahead log) are searched,
// so no record, column or audit row can hide one. The guard and its audit
// sink are wired as the daemon wires them. It holds under every guard mode:
// a tenant whose output is not redacted (off, report) still has nothing of
// it stored, since the record's text is guarded as contexts.TaskStoredRecord
// (before, under off and report the record's lastError kept the secret).
func TestSecretsAndOutputNotStored(t *testing.T) {
	for _, mode := range []string{guard.ModeEnforce, guard.ModeReport, guard.ModeOff} {
		t.Run(mode, func(t *testing.T) { secretsNotStored(t, mode) })
	}
}

func secretsNotStored(t *testing.T, mode string) {
	const (
		secret = "sk-live-7Qh2Zp9Xw4"
		output = "raw-output-3b61f0c2"
		email  = "alice.pemberton@example.org"
	)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sandlot.db")
	st, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	audits := 0
	g, err := guard.New(guard.Config{Mode: mode, Audit: func(ctx context.Context, ev guard.Event) {
		audits++
		if err := st.AppendAudit(ctx, audit.Event{TenantID: ev.TenantID, Kind: audit.KindGuardFinding,
			Detail: map[string]string{"type": ev.Type, "mode": ev.Mode, "hmac": ev.HMAC}}); err != nil {
			t.Errorf("audit: %v", err)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, p: contextstest.NewProvider(), store: st, clock: newClock()}
	e.start(contexts.Config{Guard: g})
	e.p.Run = func(ctx context.Context, sb *contextstest.Sandbox, p agent.RunCodeParams, out contexts.OutputFunc) (*agent.RunCodeResult, error) {
		if p.Code == "crash" {
			e.p.Vanish(sb.ID())
			return nil, fmt.Errorf("sandbox %s: agent lost while holding %s: %w", sb.ID(), p.Env["API_TOKEN"], errdefs.ErrUnavailable)
		}
		return &agent.RunCodeResult{Success: true, Stdout: output + " " + p.Env["API_TOKEN"] + " " + email + "\n"}, nil
	}
	id := ident("t1", "c1", "main")
	call := contexts.WithSecrets(ctx, map[string]string{"API_TOKEN": secret})
	req := contexts.ExecuteRequest{Language: "python", Code: "print(token)", Env: map[string]string{"API_TOKEN": secret}}
	res, err := e.m.Execute(call, id, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains([]byte(res.Stdout), []byte(output)) || mode == guard.ModeEnforce && bytes.Contains([]byte(res.Stdout), []byte(secret)) {
		t.Fatalf("stdout %q: want the output with the secret masked", res.Stdout)
	}
	first := res.ContextID
	req.Code = "crash"
	if _, err := e.m.Execute(call, id, req, nil); err == nil {
		t.Fatal("the crash was no error")
	}
	if r := e.record(first); r.State != contexts.StateError || r.LastError == "" {
		t.Fatalf("record after the crash: %+v; want error with a lastError (the path under test)", r)
	}
	if audits == 0 && mode != guard.ModeOff {
		t.Fatal("the guard audited no finding: the audit path was not taken")
	}
	var db []byte
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		db = append(db, b...)
	}
	for _, v := range []string{secret, output, email} {
		if bytes.Contains(db, []byte(v)) {
			t.Errorf("the store's database holds %q", v)
		}
	}
}
