package server_test

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
)

// TestShellProtocol: a shell route upgrades to sandlot-shell and speaks
// its lines (the fake sandbox's process echoes its command line and
// exits); what is refused before the upgrade answers as any route does.
// The terminal itself is tested on a real sandbox (cli, TestShellTerminal).
func TestShellProtocol(t *testing.T) {
	e := newEnv(t, nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(ts.URL, client.WithAPIKey(e.KeyA))
	sh, err := c.OpenShell(ctx, client.FileTarget{ConversationID: "term"}, 100, 30)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	var data string
	for {
		o, err := sh.Recv()
		if err != nil {
			t.Fatalf("recv: %v (data so far %q)", err, data)
		}
		if o.Type == api.ShellData {
			data += o.Data
			continue
		}
		if o.Type != api.ShellExit || o.ExitCode != 0 || data != "/bin/bash -l\n" {
			t.Fatalf("end %+v after %q", o, data)
		}
		break
	}
	if _, err := sh.Recv(); err != io.EOF {
		t.Errorf("after exit: %v, want EOF", err)
	}

	// Not upgraded: 400 naming the protocol. A bad size: 400.
	w := e.do(t, req{method: "GET", path: "/v1/conversations/term/paths/main/shell", key: e.KeyA})
	if got := decodeErr(t, w); w.Code != 400 || got.Message == "" {
		t.Errorf("without Upgrade: %d %+v", w.Code, got)
	}
	if _, err := c.OpenShell(ctx, client.FileTarget{ConversationID: "term"}, 5000, 10); !client.IsInvalidArgument(err) {
		t.Errorf("cols 5000: %v", err)
	}
	if _, err := c.OpenShell(ctx, client.FileTarget{ContextID: "4b1e0c3a-1f2e-4d5c-8b9a-0123456789ab"}, 80, 24); !client.IsNotFound(err) {
		t.Errorf("an unknown context: %v", err)
	}
}
