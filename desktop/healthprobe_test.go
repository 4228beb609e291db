package desktop

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHealthProbeSlowIsNotStopped: the health check's HTTP probe takes a
// part that answers after more than its first second as answering (a
// loaded machine's browser or websockify is slow, not stopped), and one
// that refuses as stopped. With a plain one-second request the slow part
// counted as a failed health check, and the session's parts were
// restarted while they ran (TestManager under load).
func TestHealthProbeSlowIsNotStopped(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (the desktop image's health check runs it)")
	}
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release: // the test is over
		case <-time.After(1500 * time.Millisecond):
		}
	}))
	defer slow.Close()
	defer close(release)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/"
	l.Close()
	probe := func(url string) string {
		out, _ := exec.Command("bash", "-c", httpProbe+"\nprobe "+url+"; echo $?").Output()
		return strings.TrimSpace(string(out))
	}
	if got := probe(slow.URL + "/json/version"); got != "0" {
		t.Errorf("a part answering after 1.5 s: probe exited %s, want 0 (answers)", got)
	}
	if got := probe(refused); got == "0" || got == "" {
		t.Errorf("a port nothing listens on: probe exited %q, want a failure", got)
	}
}
