package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store/memory"
)

// TestUploadAllOrNothingRealSandbox: a multipart POST /files on a real
// sandbox writes its files all or none. A part the sandbox's user cannot
// write (/etc) fails the request and leaves none of the files before it,
// and a file it would have replaced keeps its content; a good upload
// replaces a file keeping its mode (an executable stays one), writes
// through a symbolic link as envd does, keeps the upload's metadata, and
// leaves no staging file.
func TestUploadAllOrNothingRealSandbox(t *testing.T) {
	m := contexts.NewManager(memory.New(), sandboxProvider(t), contexts.Config{PoolSize: -1, Logger: slog.New(slog.DiscardHandler)})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	srv := httptest.NewServer(e2bcompat.New(e2bcompat.Config{Manager: m, Tenants: e2bcompattest.Tenants{apiKey: "tenant-upload"}}))
	t.Cleanup(srv.Close)
	do := func(method, path string, body io.Reader, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, body)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := do("POST", "/v2/sandboxes", strings.NewReader(`{"templateID":"base"}`), "X-API-KEY", apiKey, "Content-Type", "application/json")
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var sb struct{ SandboxID, EnvdAccessToken string }
	json.Unmarshal(body, &sb)
	hdr := []string{"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983", "X-Access-Token", sb.EnvdAccessToken}
	t.Cleanup(func() { do("DELETE", "/sandboxes/"+sb.SandboxID, nil, "X-API-KEY", apiKey) })
	recs, err := m.List(context.Background(), contexts.Filter{TenantID: "tenant-upload"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("contexts: %v %v", recs, err)
	}
	rec := recs[0]
	run := func(cmd string) string {
		t.Helper()
		var out string
		err := m.Use(context.Background(), rec.Identity, contexts.CreateOptions{ContextID: rec.ID}, func(ctx context.Context, _ *contexts.Record, sb contexts.Sandbox) error {
			res, err := sb.Exec(ctx, agent.ExecParams{Shell: cmd}, nil)
			if err == nil {
				out = res.Stdout
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
	upload := func(extra []string, parts ...[2]string) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, p := range parts {
			fw, _ := mw.CreateFormFile("file", p[0])
			fw.Write([]byte(p[1]))
		}
		mw.Close()
		return do("POST", "/files", &buf, append(append(hdr, "Content-Type", mw.FormDataContentType()), extra...)...)
	}

	run(`printf old > /home/user/keep.sh && chmod 755 /home/user/keep.sh && mkdir -p /home/user/real && ln -s real/t.txt /home/user/link.txt`)
	before := run(`ls -A /home/user | sort | tr '\n' ' '`)
	if code, body := upload(nil, [2]string{"/home/user/new.txt", "new"}, [2]string{"/home/user/keep.sh", "replaced"}, [2]string{"/etc/forbidden.txt", "x"}); code < 400 || code >= 500 {
		t.Fatalf("upload with an unwritable part: %d %s, want a 4xx", code, body)
	}
	if got := run(`ls -A /home/user | sort | tr '\n' ' '`); got != before {
		t.Errorf("/home/user after the failed upload: %q, before %q", got, before)
	}
	if got := run(`cat /home/user/keep.sh; test -e /etc/forbidden.txt && echo " forbidden written"`); got != "old" {
		t.Errorf("keep.sh after the failed upload: %q, want old", got)
	}

	code, body = upload([]string{"X-Metadata-Origin", "upload-test"}, [2]string{"/home/user/keep.sh", "#!/bin/sh\necho ran\n"}, [2]string{"/home/user/link.txt", "through"}, [2]string{"/home/user/sub/b.txt", "b"})
	if code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	var out []struct{ Path, Name string }
	json.Unmarshal(body, &out)
	if len(out) != 3 || out[0].Path != "/home/user/keep.sh" || out[1].Path != "/home/user/link.txt" || out[2].Name != "b.txt" {
		t.Errorf("upload answer %s", body)
	}
	if got := run(`/home/user/keep.sh; cat /home/user/real/t.txt; echo; test -L /home/user/link.txt && echo link; cat /home/user/sub/b.txt; echo; ls -A /home/user /home/user/real /home/user/sub | grep -c upload-`); got != "ran\nthrough\nlink\nb\n0\n" {
		t.Errorf("after the upload: %q, want keep.sh executable with the new script, the link's target written, no staging file", got)
	}
	code, body = do("POST", "/filesystem.Filesystem/Stat", strings.NewReader(`{"path":"/home/user/sub/b.txt"}`), append(hdr, "Content-Type", "application/json", "Connect-Protocol-Version", "1")...)
	if code != 200 || !strings.Contains(string(body), `"upload-test"`) {
		t.Errorf("stat of an uploaded file: %d %s, want its metadata origin=upload-test", code, body)
	}
}
