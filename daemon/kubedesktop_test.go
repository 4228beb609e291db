package daemon

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/console"
)

// TestKubernetesDesktop: on Kubernetes the desktop tools are offered when
// the desktop's pod image is named (--kube-images desktop=REF), and then
// the console frames live views of the ports domain, which the front
// door serves for pods; without the image, neither.
func TestKubernetesDesktop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		images map[string]string
		want   bool
	}{
		{"desktop image", map[string]string{"desktop": "registry.test/sandlot/desktop@sha256:0123"}, true},
		{"no desktop image", map[string]string{"default": "registry.test/sandlot/default:1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := start(t, "", Config{DataDir: filepath.Join(dir, "data"), StateDir: filepath.Join(dir, "run"),
				Providers: []string{"kubernetes"}, PoolSize: 0, ShutdownTimeout: 5 * time.Second,
				Desktop:    Desktop{Template: DesktopFirstUse},
				Kubernetes: Kubernetes{Kubeconfig: deadKubeconfig(t), Images: tc.images}})
			get := func(path string) (*http.Response, string) {
				req, _ := http.NewRequest("GET", d.url+path, nil)
				req.Header.Set("X-API-KEY", d.key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp, string(b)
			}
			if _, body := get("/v1/tools"); strings.Contains(body, "desktop_live_view") != tc.want {
				t.Errorf("desktop_live_view listed: %v, want %v", !tc.want, tc.want)
			}
			resp, _ := get("/ui")
			wantCSP := console.CSP
			if tc.want {
				wantCSP = console.LiveViewCSP("sandlot.localhost")
			}
			if got := resp.Header.Get("Content-Security-Policy"); got != wantCSP {
				t.Errorf("console CSP %q, want %q", got, wantCSP)
			}
		})
	}
}
