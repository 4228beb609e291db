package k8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandlot/sandlot/internal/kubetest"
)

func randSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// namespace is the cluster's Namespace helper, kept short for the tests.
func namespace(t *testing.T, c *kubetest.Cluster, prefix string) string {
	t.Helper()
	return c.Namespace(t, prefix)
}

// poll checks cond until it holds, failing the test after bound with the
// last state cond reported.
func poll(t *testing.T, bound time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	pollDiag(t, bound, what, cond, nil)
}

// pollDiag is poll that, when the bound passes, also reports diag's
// account of the state (when diag is not nil).
func pollDiag(t *testing.T, bound time.Duration, what string, cond func() (bool, string), diag func() string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			if diag != nil {
				last += "\n" + diag()
			}
			t.Fatalf("waiting %s for %s: %s", bound, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probePod is a pod running the probe image (HTTP on 8080).
func probePod(name, image, runtimeClass string, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "probe",
				Image: image,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}},
			AutomountServiceAccountToken:  new(false),
			TerminationGracePeriodSeconds: new(int64(1)),
		},
	}
	if runtimeClass != "" {
		p.Spec.RuntimeClassName = &runtimeClass
	}
	return p
}

// runPod creates the pod and waits until it runs and answers on 8080; it
// returns the pod's IP.
func runPod(t *testing.T, c *kubetest.Cluster, ns string, pod *corev1.Pod) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	poll(t, 3*time.Minute, "pod "+ns+"/"+pod.Name+" running", func() (bool, string) {
		p, err := c.Client().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			t.Fatalf("pod %s ended: %s %s", pod.Name, p.Status.Phase, podState(p))
		}
		ip = p.Status.PodIP
		return p.Status.Phase == corev1.PodRunning && ip != "", podState(p)
	})
	poll(t, time.Minute, "pod "+pod.Name+" answering", func() (bool, string) {
		_, err := get("http://" + ip + ":8080/")
		return err == nil, fmt.Sprint(err)
	})
	return ip
}

func podState(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			fmt.Fprintf(&b, "; %s waiting: %s %s", cs.Name, w.Reason, w.Message)
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			fmt.Fprintf(&b, "; %s: %s", cond.Type, cond.Message)
		}
	}
	return b.String()
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// get fetches url and returns the body of a 200.
func get(url string) (string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}
