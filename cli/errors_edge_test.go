package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/errdefs/errdefstest"
)

// TestErrorEdge walks every category through the CLI: a server's answer
// becomes one line "error: SENTENCE" on stderr and the category's exit
// status, and in JSON mode one JSON object {code, message, exitCode} on
// stderr instead; stdout stays empty either way.
func TestErrorEdge(t *testing.T) {
	e := servertest.NewEnv(nil)
	ts := httptest.NewServer(e.Handler)
	defer ts.Close()
	t.Setenv(envClientConfig, t.TempDir()+"/none.yaml")
	for _, c := range errdefstest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			e.Contexts.FailAll = c.Err
			defer func() { e.Contexts.FailAll = nil }()
			base := []string{"ctx", "ls", "--url", ts.URL, "--api-key", e.KeyA}

			var out, errw bytes.Buffer
			code := Main(context.Background(), base, strings.NewReader(""), &out, &errw)
			if code != c.Exit || out.Len() != 0 {
				t.Errorf("exit %d, stdout %q; want exit %d", code, out.String(), c.Exit)
			}
			line := strings.TrimSuffix(errw.String(), "\n")
			msg, ok := strings.CutPrefix(line, "error: ")
			if !ok || strings.Contains(msg, "\n") {
				t.Fatalf("stderr %q is not one error line", errw.String())
			}
			errdefstest.Check(t, "CLI", c, msg)

			for _, mode := range [][]string{{"-o", "json"}, {"--json"}, {"-o", "yaml"}} {
				out.Reset()
				errw.Reset()
				code = Main(context.Background(), append(base, mode...), strings.NewReader(""), &out, &errw)
				var got jsonError
				if err := json.Unmarshal(errw.Bytes(), &got); err != nil || out.Len() != 0 {
					t.Fatalf("%v: stderr %q is not a JSON error (%v), stdout %q", mode, errw.String(), err, out.String())
				}
				if code != c.Exit || got.ExitCode != c.Exit || got.Code != c.Code {
					t.Errorf("%v: exit %d, %+v; want exit %d, code %s", mode, code, got, c.Exit, c.Code)
				}
				errdefstest.Check(t, "CLI JSON", c, got.Message)
			}
		})
	}
}
