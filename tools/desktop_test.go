package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/errdefs"
)

// fakeDesktop records the actions it is asked for.
type fakeDesktop struct{ acts []desktop.Action }

func (f *fakeDesktop) Screenshot(ctx context.Context, id contexts.Identity) (*desktop.Screenshot, error) {
	return &desktop.Screenshot{PNG: []byte("\x89PNG fake"), Width: 2, Height: 1}, nil
}

func (f *fakeDesktop) Act(ctx context.Context, id contexts.Identity, a desktop.Action) (*desktop.ActionResult, error) {
	f.acts = append(f.acts, a)
	return &desktop.ActionResult{ActiveWindow: "w"}, nil
}

func (f *fakeDesktop) LiveView(ctx context.Context, id contexts.Identity, viewOnly bool) (*desktop.LiveView, error) {
	return &desktop.LiveView{URL: "https://6080-x.example/vnc.html", ViewOnly: viewOnly}, nil
}

func (f *fakeDesktop) Windows(ctx context.Context, id contexts.Identity) (*desktop.WindowList, error) {
	return &desktop.WindowList{Windows: []desktop.Window{{ID: "1", Title: "a page", Active: true}}}, nil
}

func (f *fakeDesktop) Clipboard(ctx context.Context, id contexts.Identity) (*desktop.Clipboard, error) {
	return &desktop.Clipboard{Text: "copied"}, nil
}

// TestDesktopTools: the desktop tools exist only with a desktop manager,
// say that pixels pass the guard, map their arguments to actions and
// refuse bad arguments before anything runs.
func TestDesktopTools(t *testing.T) {
	if names := toolNames(New(&fakeContexts{t: t}, Config{})); strings.Contains(names, "desktop_") {
		t.Errorf("tools without a desktop manager: %s", names)
	}
	fd := &fakeDesktop{}
	r := New(&fakeContexts{t: t}, Config{Desktop: fd})
	for _, tool := range r.Tools() {
		if strings.HasPrefix(tool.Name, "desktop_") && !strings.Contains(tool.Description, "cannot redact pixels") {
			t.Errorf("%s's description does not say the guard cannot redact pixels", tool.Name)
		}
	}
	id := contexts.Identity{TenantID: "t", ConversationID: "c", PathID: "main"}
	call := func(name, args string) (any, error) {
		return r.Call(context.Background(), Call{Name: name, Identity: id, Args: json.RawMessage(args)}, nil)
	}
	for _, c := range []struct{ name, args string }{
		{"desktop_click", `{"x":1,"y":2,"button":"right","double":true}`},
		{"desktop_move", `{"x":3,"y":4}`},
		{"desktop_type", `{"text":"hi"}`},
		{"desktop_key", `{"keys":"ctrl+s"}`},
		{"desktop_scroll", `{"direction":"up","amount":3}`},
		{"desktop_open_url", `{"url":"https://example.org/"}`},
	} {
		if _, err := call(c.name, c.args); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	want := []desktop.Action{
		{Kind: "double_click", X: 1, Y: 2, Button: "right"}, {Kind: "move", X: 3, Y: 4}, {Kind: "type", Text: "hi"},
		{Kind: "key", Text: "ctrl+s"}, {Kind: "scroll", Dir: "up", Amount: 3}, {Kind: "open_url", Text: "https://example.org/"},
	}
	if d := cmp.Diff(want, fd.acts); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	res, err := call("desktop_screenshot", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.(*ScreenshotResult); s.PNG != base64.StdEncoding.EncodeToString([]byte("\x89PNG fake")) || s.Width != 2 {
		t.Errorf("screenshot = %+v", s)
	}
	for _, bad := range []struct{ name, args string }{
		{"desktop_click", `{"x":-1,"y":2}`},
		{"desktop_click", `{"x":1}`},
		{"desktop_click", `{"x":1,"y":1,"button":"fourth"}`},
		{"desktop_type", `{"text":""}`},
		{"desktop_scroll", `{"amount":51}`},
		{"desktop_screenshot", `{"extra":1}`},
		{"desktop_open_url", `{"url":"` + strings.Repeat("a", 8193) + `"}`},
	} {
		if _, err := call(bad.name, bad.args); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s %s: %v, want invalid_argument", bad.name, bad.args, err)
		}
	}
}

func toolNames(r *Registry) string {
	var names []string
	for _, t := range r.Tools() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}
