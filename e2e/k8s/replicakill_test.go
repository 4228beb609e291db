package k8s

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/internal/kubetest"
	"github.com/sandlot/sandlot/internal/kubetest/install"
)

type call struct {
	start, end time.Time
	err        error
	dial       bool // the request never reached a replica (refused, no route)
}

// testReplicaKill: contexts with state, calls on each in a loop through the
// Service, and the replica that holds the cleanup lease deleted with grace
// 0 meanwhile, so the other takes the lease over under load and does what
// a new holder does (it ends the records whose pod is lost). Contexts are
// made until the victim made some (records name the replica that made
// them; SANDLOT_NODE is the pod's name); with a connection per call, both
// replicas serve every context. A call whose connection could not be made
// never reached a replica and is tried again (a client's retry); a call
// that failed after it was sent is lost, and only calls in flight when the
// pod was deleted, or sent before the Service stopped naming it, may be.
// Afterwards every context is the same context on
// the same sandbox, and the variable set before the kill is there with
// every increment that was answered.
func testReplicaKill(t *testing.T, c *kubetest.Cluster, in *install.Install, cl *client.Client) {
	ctx := context.Background()
	ns := in.Namespace
	pods, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sandlot"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("daemon pods: %v, %v", pods, err)
	}
	victim := leaseHolder(t, in.PostgresURL)
	survivor, victimIP := "", ""
	for _, p := range pods.Items {
		if p.Name != victim {
			survivor = p.Name
		} else {
			victimIP = p.Status.PodIP
		}
	}
	if survivor == "" || survivor == victim {
		t.Fatalf("the cleanup lease's holder %q is not one of the daemon pods %s, %s", victim, pods.Items[0].Name, pods.Items[1].Name)
	}

	var targets []client.Target
	var ids, sandboxes []string
	made := 0
	defer func() {
		// By conversation: a context that ended meanwhile has a successor.
		for i, tg := range targets {
			if _, err := cl.EndConversation(ctx, tg.ConversationID); err != nil {
				t.Errorf("end conversation %d (first context %s): %v", i, ids[i], err)
			}
		}
	}()
	for i := 0; len(targets) < 4 || made == 0; i++ {
		if i == 12 {
			t.Fatalf("%d contexts made, none by %s: the Service does not spread calls", i, victim)
		}
		tg := client.Target{ConversationID: fmt.Sprintf("load-%d-%s", i, randSuffix())}
		r, err := cl.RunCode(ctx, client.RunCodeRequest{Target: tg, Language: "python", Code: fmt.Sprintf("n = %d", 100000*i)})
		if err != nil || !r.Success {
			t.Fatalf("context %d: %s, %v", i, describe(r), err)
		}
		rec, err := cl.GetContext(ctx, r.ContextID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Node == victim {
			made++
		}
		targets, ids, sandboxes = append(targets, tg), append(ids, r.ContextID), append(sandboxes, r.SandboxID)
		t.Logf("context %d: %s on sandbox %s, made by %s", i, r.ContextID, r.SandboxID, rec.Node)
	}
	n := len(targets)
	logs := map[string]*podLog{}
	for _, p := range pods.Items {
		logs[p.Name] = followLog(c, ns, p.Name)
	}
	var (
		mu    sync.Mutex
		calls []call
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				cc := call{start: time.Now()}
				want := fmt.Sprint(100000*i + k + 1)
				for {
					r, err := cl.RunCode(ctx, client.RunCodeRequest{Target: targets[i], Language: "python", Code: "n += 1\nprint(n)"})
					if err == nil && strings.TrimSpace(r.Stdout) != want {
						err = fmt.Errorf("context %d: got %q, want %s (%s)", i, r.Stdout, want, describe(r))
					}
					if err == nil && r.Rotated {
						err = fmt.Errorf("context %d rotated (its executions used up): the test makes more calls than the install's max-executions", i)
					}
					if err == nil && (r.ContextID != ids[i] || r.SandboxID != sandboxes[i]) {
						err = fmt.Errorf("context %d: served by context %s on sandbox %s, want %s on %s", i, r.ContextID, r.SandboxID, ids[i], sandboxes[i])
					}
					var op *net.OpError
					if err != nil && errors.As(err, &op) && op.Op == "dial" {
						mu.Lock()
						calls = append(calls, call{start: cc.start, end: time.Now(), err: err, dial: true})
						mu.Unlock()
						continue // never sent: try again
					}
					cc.end, cc.err = time.Now(), err
					break
				}
				mu.Lock()
				calls = append(calls, cc)
				mu.Unlock()
				if cc.err != nil {
					// The call may or may not have run: read the counter
					// back (a connection refused was never sent).
					r, err := cl.RunCode(ctx, client.RunCodeRequest{Target: targets[i], Language: "python", Code: "print(n)"})
					for try := 0; err != nil && errors.As(err, new(*net.OpError)) && try < 50; try++ {
						time.Sleep(100 * time.Millisecond)
						r, err = cl.RunCode(ctx, client.RunCodeRequest{Target: targets[i], Language: "python", Code: "print(n)"})
					}
					if err != nil || !r.Success {
						t.Errorf("context %d after a failed call: %s, %v", i, describe(r), err)
						return
					}
					var got int
					fmt.Sscan(strings.TrimSpace(r.Stdout), &got)
					// Whether the failed call ran: its counter is the
					// one it should have printed, or the one before.
					t.Logf("context %d after a failed call: the counter reads %d (the call wanted %s)", i, got, want)
					k = got - 100000*i - 1
				}
			}
		})
	}

	time.Sleep(5 * time.Second)
	killed := time.Now()
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	// Until the Service stops naming the victim's address (and kube-proxy
	// applies that, within a second here), a new call may still be sent
	// to it and fail: that call reached the killed replica.
	left := killed
	for deadline := killed.Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !inService(ctx, c, ns, victimIP) {
			left = time.Now().Add(time.Second)
			break
		}
	}
	t.Logf("the Service stopped naming the victim's address %.1fs after the kill", left.Sub(killed).Seconds()-1)
	t.Logf("deleted replica %s (the cleanup lease's holder; it made %d of the %d contexts) with grace 0", victim, made, n)
	// The lease lapses 30 s after the victim's last renewal; another
	// replica takes it at its next renewal (every 10 s) and does what a
	// new holder does (ends the records whose pod is lost) under load.
	var holder string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if holder = leaseHolderNow(in.PostgresURL); holder != "" && holder != victim {
			break
		}
	}
	t.Logf("the cleanup lease: %q, %.1fs after the kill", holder, time.Since(killed).Seconds())
	if holder == "" || holder == victim {
		t.Errorf("no replica took the cleanup lease over from %s within 2 minutes", victim)
	}
	time.Sleep(10 * time.Second) // calls go on after the takeover
	close(stop)
	wg.Wait()

	var ok, lost, retried, inFlight int
	for _, cc := range calls {
		switch {
		case cc.dial:
			retried++
		case cc.err == nil:
			ok++
		default:
			lost++
			t.Logf("failed: started %.1fs, ended %.1fs after the kill: %v", cc.start.Sub(killed).Seconds(), cc.end.Sub(killed).Seconds(), cc.err)
			var op *net.OpError
			transport := errors.As(cc.err, &op) || errors.Is(cc.err, io.EOF) || errors.Is(cc.err, io.ErrUnexpectedEOF) || strings.Contains(cc.err.Error(), "EOF")
			if transport && cc.start.Before(left) {
				inFlight++
			} else {
				t.Errorf("a call started %.1fs after the kill failed: %v", cc.start.Sub(killed).Seconds(), cc.err)
			}
		}
	}
	t.Logf("calls: %d answered, %d failed (%d sent to the killed replica), %d connections refused and tried again", ok, lost, inFlight, retried)
	if ok == 0 {
		t.Fatal("no call answered")
	}
	for i := range targets {
		r, err := cl.RunCode(ctx, client.RunCodeRequest{Target: targets[i], Language: "python", Code: "print(n >= " + fmt.Sprint(100000*i+1) + ")"})
		switch {
		case err != nil || strings.TrimSpace(r.Stdout) != "True":
			t.Errorf("context %d: the variable set before the kill: %s, %v", i, describe(r), err)
		case r.ContextID != ids[i] || r.SandboxID != sandboxes[i]:
			t.Errorf("context %d: after the kill context %s on sandbox %s, want %s on %s", i, r.ContextID, r.SandboxID, ids[i], sandboxes[i])
		}
	}
	if t.Failed() {
		for name, l := range logs {
			t.Logf("the log of %s:\n%s", name, l.String())
		}
	}
}

// inService reports whether an EndpointSlice of the chart's Service names
// ip as an endpoint that may take connections.
func inService(ctx context.Context, c *kubetest.Cluster, ns, ip string) bool {
	l, err := c.Client().DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + install.Release})
	if err != nil {
		return true
	}
	for _, es := range l.Items {
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if slices.Contains(ep.Addresses, ip) {
				return true
			}
		}
	}
	return false
}

// leaseHolder is the replica that holds the cleanup lease, from the store.
func leaseHolder(t *testing.T, url string) string {
	t.Helper()
	h := leaseHolderNow(url)
	if h == "" {
		t.Fatal("no replica holds the cleanup lease")
	}
	return h
}

// leaseHolderNow is the cleanup lease's holder, "" when none holds it or
// the store does not answer.
func leaseHolderNow(url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	var holder string
	if err := conn.QueryRow(ctx, `SELECT holder FROM leases WHERE name = 'cleanup' AND expires_at > now()`).Scan(&holder); err != nil {
		return ""
	}
	return holder
}

// podLog follows a pod's log, keeping the lines that speak of contexts,
// sandboxes and the lease (a deleted pod's log is gone with it).
type podLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *podLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func followLog(c *kubetest.Cluster, ns, pod string) *podLog {
	l := &podLog{}
	go func() {
		rc, err := c.Client().CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(context.Background())
		if err != nil {
			l.b.WriteString(err.Error())
			return
		}
		defer rc.Close()
		re := regexp.MustCompile(`(?i)lost|unhealthy|lease|dropping|sweep|reconcil|cleanup|destroy|creat|attach|WARN|ERROR`)
		sc := bufio.NewScanner(rc)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if re.MatchString(sc.Text()) && !strings.Contains(sc.Text(), "/readyz") {
				l.mu.Lock()
				l.b.WriteString(sc.Text())
				l.b.WriteByte('\n')
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// describe is a run's output and error, for failure messages.
func describe(r *api.RunCodeResult) string {
	if r == nil {
		return "no result"
	}
	s := fmt.Sprintf("stdout %q stderr %q exit %d success %v context %s sandbox %s took %d ms", r.Stdout, r.Stderr, r.ExitCode, r.Success, r.ContextID, r.SandboxID, r.ExecutionTimeMs)
	if r.KernelRestarted || r.StateLost || r.Rotated {
		s += fmt.Sprintf(" (kernel restarted %v, state lost %v, rotated %v)", r.KernelRestarted, r.StateLost, r.Rotated)
	}
	if r.Error != nil {
		s += fmt.Sprintf(" error %s: %s", r.Error.Name, r.Error.Value)
	}
	if r.Notice != "" {
		s += " notice " + r.Notice
	}
	return s
}
