package k8s

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/image/podimage"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/testenv"
	"github.com/sandlot/sandlot/network/policy"
	"github.com/sandlot/sandlot/store/memory"
	"github.com/sandlot/sandlot/tenant"
)

var desktopPod struct {
	once sync.Once
	ref  string
	err  error
}

// desktopPodImage pushes the desktop template's pod image (the desktop's
// Debian image from the tests' shared store plus the agent) to the
// cluster's registry, once per test binary, and returns its pinned
// reference.
func desktopPodImage(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	store, img := debiantest.Image(t, desktop.ImageConfig(), desktop.Template)
	agentBin, err := os.ReadFile(testenv.PodAgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	desktopPod.once.Do(func() {
		ctx := context.Background()
		base, err := store.V1(ctx, img.Digest)
		if err != nil {
			desktopPod.err = err
			return
		}
		pi, err := podimage.Build(ctx, base, agentBin)
		if err != nil {
			desktopPod.err = err
			return
		}
		pinned, err := podimage.Push(ctx, pi, c.Registry+"/sandlot/desktop:e2e", nil)
		desktopPod.ref, desktopPod.err = pinned.String(), err
	})
	if desktopPod.err != nil {
		t.Fatalf("the desktop pod image: %v", desktopPod.err)
	}
	return desktopPod.ref
}

// TestLiveViewOnCluster: a desktop on the kubernetes provider, watched
// through the daemon's front door. The daemon (on the node, the provider
// kubernetes, the desktop's pod image named) offers the desktop tools; a
// session's desktop_live_view URL names the ports domain, and through
// the front door by that host its page is noVNC's, served by websockify
// in the pod, and its WebSocket reaches x11vnc in the pod, which asks for
// VNC authentication (the session's password), as on one host. An E2B
// create of the desktop answers the ports domain (getHost names the front
// door), gets the desktop's public ports and no egress, and what its pod
// serves through the route passes the guard; a closed port and an
// unknown sandbox get the route's answers.
func TestLiveViewOnCluster(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (the test cluster)")
	c := kubetest.Shared(t)
	ref := desktopPodImage(t, c)
	ns := namespace(t, c, "liveview")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	st := memory.New()
	key, err := tenant.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTenant(ctx, &tenant.Tenant{ID: "t1", Name: "t1", KeyPrefix: tenant.Prefix(key), GuardMode: tenant.GuardEnforce}, tenant.HashKey(key)); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(ctx, daemon.Config{
		DataDir:   t.TempDir(),
		StateDir:  t.TempDir(),
		Providers: []string{"kubernetes"},
		PoolSize:  0,
		// A loaded 2-core node under gVisor draws XFCE slowly; the live
		// view needs the stream, not the drawing.
		Desktop: daemon.Desktop{Template: daemon.DesktopFirstUse, StreamWait: time.Minute},
		Kubernetes: daemon.Kubernetes{
			Kubeconfig:    c.Kubeconfig,
			Namespace:     ns,
			RuntimeClass:  "gvisor",
			Images:        map[string]string{desktop.Template: ref},
			CreateTimeout: 10 * time.Minute,
		},
	}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	front := httptest.NewServer(d.Handler())
	defer front.Close()
	frontAddr := strings.TrimPrefix(front.URL, "http://")
	hc := &http.Client{Timeout: time.Minute}
	do := func(method, path, host, body string, header map[string]string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, front.URL+path, strings.NewReader(body))
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		client := hc
		if strings.HasPrefix(path, "/v1/tools/") || path == "/sandboxes" {
			client = &http.Client{Timeout: 15 * time.Minute} // the first pulls the image
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	auth := map[string]string{"X-API-KEY": key, "Content-Type": "application/json"}

	// The tools' session and its live view.
	defer do("DELETE", "/v1/conversations/lv", "", "", auth)
	start := time.Now()
	code, b := do("POST", "/v1/tools/desktop_live_view", "", `{"conversationId":"lv","args":{}}`, auth)
	if code != 200 {
		t.Fatalf("desktop_live_view: %d %s", code, b)
	}
	t.Logf("desktop session with its live view after %s", time.Since(start).Round(time.Millisecond))
	var lv struct{ URL string }
	if err := json.Unmarshal(b, &lv); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(lv.URL)
	if err != nil || u.Scheme != "https" || !strings.HasPrefix(u.Host, "6080-") || !strings.HasSuffix(u.Host, ".sandlot.localhost") ||
		u.Path != "/vnc.html" || len(u.Query().Get("password")) != 8 {
		t.Fatalf("live view URL %q", lv.URL)
	}
	// The front door is plain HTTP here; the URL's https is the TLS an
	// operator puts in front of it. A browser sends no key: none is sent.
	var page []byte
	poll(t, 2*time.Minute, "noVNC's page through the front door", func() (bool, string) {
		code, page = do("GET", "/vnc.html", u.Host, "", nil)
		return code == 200 && strings.Contains(string(page), "noVNC"), fmt.Sprintf("%d %.200s", code, page)
	})
	if rfbSecurity(t, frontAddr, u.Host) != 2 {
		t.Error("the stream did not ask for VNC authentication")
	}

	// The E2B path: a create of the desktop answers the ports domain;
	// getHost(port) is <port>-<sandboxID>.<domain>, whose public port
	// is served through the route, and what it serves passes the guard.
	code, b = do("POST", "/sandboxes", "", `{"templateID":"desktop","timeout":600}`, map[string]string{"X-API-Key": key, "Content-Type": "application/json"})
	if code != 201 && code != 200 {
		t.Fatalf("E2B create: %d %s", code, b)
	}
	var sb struct {
		SandboxID string  `json:"sandboxID"`
		Domain    *string `json:"domain"`
	}
	if err := json.Unmarshal(b, &sb); err != nil {
		t.Fatal(err)
	}
	defer do("DELETE", "/sandboxes/"+sb.SandboxID, "", "", map[string]string{"X-API-Key": key})
	if sb.Domain == nil || *sb.Domain != "sandlot.localhost" {
		t.Fatalf("E2B create answered domain %v, want sandlot.localhost: %s", sb.Domain, b)
	}
	rec, err := st.Get(ctx, sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Network == nil || !rec.Network.Ingress.Public || rec.Network.Mode.Normalize() != policy.None {
		t.Errorf("the E2B desktop's network %+v, want public ports and no egress", rec.Network)
	}
	// The desktop's resources (desktop.Resources) are its pod's: its
	// memory limit, and the size of its home and /tmp.
	pod, err := c.Client().CoreV1().Pods(ns).Get(ctx, rec.SandboxID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the E2B desktop's pod: %v", err)
	}
	if got := pod.Spec.Containers[0].Resources.Limits.Memory().Value(); got != desktop.Resources.MemoryBytes {
		t.Errorf("the desktop pod's memory limit %d, want the desktop's %d", got, desktop.Resources.MemoryBytes)
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && (v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Value() != desktop.Resources.DiskBytes) {
			t.Errorf("the desktop pod's volume %s: size %v, want the desktop's %d", v.Name, v.EmptyDir.SizeLimit, desktop.Resources.DiskBytes)
		}
	}
	res, err := d.Manager().Execute(ctx, rec.Identity, contexts.ExecuteRequest{Language: "bash", Timeout: time.Minute,
		Code: `cd /tmp && echo "key AKIA""QWERTYUIOPASDFGH" > k.txt && (nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &)`}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("start a server in the E2B desktop: %v %+v", err, res)
	}
	host := "8000-" + sb.SandboxID + "." + *sb.Domain
	poll(t, time.Minute, "the E2B desktop's port through getHost's name", func() (bool, string) {
		code, b := do("GET", "/k.txt", host, "", nil)
		return code == 200, fmt.Sprintf("%d %s", code, b)
	})
	if _, b := do("GET", "/k.txt", host, "", nil); strings.Contains(string(b), "QWERTYUIOPASDFGH") || !strings.Contains(string(b), "[REDACTED:AWS_ACCESS_KEY]") {
		t.Errorf("the route relayed %q past the guard", b)
	}
	if code, _ := do("GET", "/", "8001-"+sb.SandboxID+"."+*sb.Domain, "", nil); code != http.StatusBadGateway {
		t.Errorf("a closed port: %d, want 502", code)
	}
	// E2B's edge answer for a sandbox that is not there, by host name.
	if code, b := do("GET", "/", "8000-0123456789ab."+*sb.Domain, "", nil); code != http.StatusBadGateway || !strings.Contains(string(b), "The sandbox was not found") {
		t.Errorf("an unknown sandbox: %d %s, want 502 not found", code, b)
	}
}

// rfbSecurity opens the stream's WebSocket (websockify's /websockify) on
// the front door at addr by host, checks the server's RFB version, sends
// the client's and returns the first security type the server offers.
func rfbSecurity(t *testing.T, addr, host string) byte {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	wsKey := make([]byte, 16)
	rand.Read(wsKey)
	k := base64.StdEncoding.EncodeToString(wsKey)
	fmt.Fprintf(conn, "GET /websockify HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: binary\r\n\r\n", host, k)
	buf := make([]byte, 4096)
	var got []byte
	for !strings.Contains(string(got), "\r\n\r\n") {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("websocket handshake: %v after %q", err, got)
		}
		got = append(got, buf[:n]...)
	}
	head, frames, _ := strings.Cut(string(got), "\r\n\r\n")
	sum := sha1.Sum([]byte(k + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if !strings.HasPrefix(head, "HTTP/1.1 101") || !strings.Contains(head, base64.StdEncoding.EncodeToString(sum[:])) {
		t.Fatalf("websocket handshake: %q", head)
	}
	fr := []byte(frames)
	read := func(n int) {
		for len(fr) < n {
			m, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("reading the stream: %v after %q", err, fr)
			}
			fr = append(fr, buf[:m]...)
		}
	}
	read(2 + 12)
	if got := string(fr[2 : 2+12]); got != "RFB 003.008\n" {
		t.Fatalf("first frame %q, want the RFB version", got)
	}
	msg := []byte("RFB 003.008\n")
	mask := []byte{1, 2, 3, 4}
	out := append([]byte{0x82, 0x80 | byte(len(msg))}, mask...)
	for i, c := range msg {
		out = append(out, c^mask[i%4])
	}
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	fr = fr[2+12:]
	read(4)
	if fr[2] < 1 {
		t.Fatalf("no security types: %v", fr[:4])
	}
	return fr[3]
}
