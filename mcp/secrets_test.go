package mcp

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDeclaredSecrets sends declared secrets in a tool call's _meta over a
// real MCP client session: the code gets them in its environment, prints
// them plain, split across two writes and base64'd, with streamed
// progress, writes them to a file read back by read_file in a call that
// declares nothing, and none of it leaves. A bad name is a tool error.
func TestDeclaredSecrets(t *testing.T) {
	const secret = "quince-lantern-5521-moss"
	s := newStack(t)
	srv := New(s.reg, Config{Tenant: "tenant-secrets"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Run(ctx, st)
	var progress strings.Builder
	opts := &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		progress.WriteString(req.Params.Message)
	}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(t *testing.T, name string, args map[string]any, meta sdk.Meta) string {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		defer ccancel()
		res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args, Meta: meta})
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		out := text(res)
		if strings.Contains(out, secret) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(secret))[:20]) {
			t.Fatalf("%s leaked the secret: %s", name, out)
		}
		return out
	}
	meta := sdk.Meta{MetaSecrets: map[string]any{"API_TOKEN": secret}, "progressToken": "p1"}
	out := call(t, "run_code", map[string]any{"language": "python", "env": map[string]any{"GREETING": "hi-mcp"}, "code": `import os, sys, time, base64
s = os.environ["API_TOKEN"]
print(os.environ["GREETING"], s)
sys.stdout.write(s[:7]); sys.stdout.flush(); time.sleep(0.4); print(s[7:])
print(base64.b64encode(s.encode()).decode())
open("t.txt", "w").write(s)
kept = s`}, meta)
	if !strings.Contains(out, "hi-mcp [REDACTED:SECRET]") {
		t.Fatalf("want the env and the marker: %s", out)
	}
	if p := progress.String(); strings.Contains(p, secret) || strings.Contains(p, secret[:7]+secret[7:]) {
		t.Fatalf("progress leaked: %q", p)
	}
	if out := call(t, "read_file", map[string]any{"path": "t.txt"}, nil); !strings.Contains(out, "[REDACTED:SECRET]") {
		t.Fatalf("read_file: %s", out)
	}
	call(t, "run_code", map[string]any{"language": "python", "code": "print(kept)"}, nil)
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"language": "python", "code": "1"},
		Meta: sdk.Meta{MetaSecrets: map[string]any{"bad-name": secret}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "not a valid variable name") || strings.Contains(text(res), secret) {
		t.Fatalf("bad name: %+v %s", res, text(res))
	}
}
