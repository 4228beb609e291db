package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	"github.com/sandlot/sandlot/errdefs"
)

// ensure is one template's objects being made, once per process.
type ensure struct {
	done chan struct{}
	err  error
}

// ensureTemplate makes the network policy and, for a pooled template, its
// SandboxTemplate, SandboxWarmPool and pool key Secret, once per process.
// The policy, template and pool that exist get this configuration's spec
// (another replica made them, or an earlier configuration: a new image,
// pool size or proxy reaches the cluster this way); the pool key that
// exists is kept, as the warm pods hold it. A failure is not remembered:
// the next create tries again.
func (p *Provider) ensureTemplate(ctx context.Context, t templateConf) error {
	p.mu.Lock()
	e, ok := p.ensured[t.name]
	if !ok {
		e = &ensure{done: make(chan struct{})}
		p.ensured[t.name] = e
		p.mu.Unlock()
		e.err = p.makeTemplate(ctx, t)
		if e.err != nil {
			p.mu.Lock()
			delete(p.ensured, t.name)
			p.mu.Unlock()
		}
		close(e.done)
		return e.err
	}
	p.mu.Unlock()
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Provider) makeTemplate(ctx context.Context, t templateConf) error {
	for _, np := range []*unstructured.Unstructured{p.networkPolicy(), p.networkPolicyNone()} {
		if err := p.apply(ctx, gvrNetworkPolicy, np, true); err != nil {
			return err
		}
	}
	if t.pool == 0 {
		return nil
	}
	tmpl, pool, secret := p.templateObjects(t, newKey())
	for _, o := range []struct {
		gvr    schema.GroupVersionResource
		u      *unstructured.Unstructured
		update bool
	}{{gvrSecret, secret, false}, {gvrTemplate, tmpl, true}, {gvrWarmPool, pool, true}} {
		if err := p.apply(ctx, o.gvr, o.u, o.update); err != nil {
			return err
		}
	}
	return nil
}

// apply creates u, or when it exists and update is set, gives the one
// that exists u's spec. Replicas whose first creates run at once may
// update one object together: an update that meets a conflict (another
// wrote it since it was read) reads it again and updates only if it still
// differs.
func (p *Provider) apply(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, update bool) error {
	r := p.c.Resource(gvr).Namespace(p.ns)
	_, err := r.Create(ctx, u, metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return apiErr(fmt.Sprintf("create %s %s", u.GetKind(), u.GetName()), err)
	}
	if !update {
		return nil
	}
	var op string
	updated := false
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := r.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			op = "read"
			return err
		}
		if covers(cur.Object["spec"], u.Object["spec"]) {
			return nil
		}
		cur.Object["spec"] = u.Object["spec"]
		op = "update"
		_, err = r.Update(ctx, cur, metav1.UpdateOptions{})
		updated = err == nil
		return err
	})
	if err != nil {
		return apiErr(fmt.Sprintf("%s %s %s", op, u.GetKind(), u.GetName()), err)
	}
	if updated {
		p.log.Info("updated to this configuration", "kind", u.GetKind(), "name", u.GetName())
	}
	return nil
}

// covers reports whether have holds every field of want with want's value
// (JSON values, as unstructured objects hold them): a field only have has
// is taken for one the API server filled in with its default, and an
// empty field of want's that have lacks for one it left out, so a spec
// read back is not updated for those alone. Lists must have want's
// length and match element by element; numbers compare by value, as the
// server's int64 and a spec's int do.
func covers(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok && empty(wv) {
				continue // the server's copy leaves out an empty field
			}
			if !ok || !covers(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !covers(h[i], w[i]) {
				return false
			}
		}
		return true
	}
	if hn, ok := number(have); ok {
		wn, ok := number(want)
		return ok && hn == wn
	}
	return reflect.DeepEqual(have, want)
}

// empty is a JSON value with nothing in it: null, [] or {}.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// number is a JSON number as float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// poolKey reads a template's pool key from its Secret (another replica
// may have made it), once per process: the Secret that exists is kept
// (ensureTemplate), so the key does not change under the warm pods.
func (p *Provider) poolKey(ctx context.Context, t templateConf) ([]byte, error) {
	p.mu.Lock()
	k := p.poolKeys[t.name]
	p.mu.Unlock()
	if k != nil {
		return k, nil
	}
	s, err := p.c.Resource(gvrSecret).Namespace(p.ns).Get(ctx, objectName(t.name)+"-pool", metav1.GetOptions{})
	if err != nil {
		return nil, apiErr("read the pool key", err)
	}
	k, err = secretData(s, secretKey)
	if err != nil {
		return nil, fmt.Errorf("template %s: %v: %w", t.name, err, errdefs.ErrFailedPrecondition)
	}
	p.mu.Lock()
	p.poolKeys[t.name] = k
	p.mu.Unlock()
	return k, nil
}

// forgetPoolKey drops a template's pool key after an enrollment with it
// failed: an operator may have replaced the Secret.
func (p *Provider) forgetPoolKey(t templateConf) {
	p.mu.Lock()
	delete(p.poolKeys, t.name)
	p.mu.Unlock()
}

// podRef is the pod behind a sandbox.
type podRef struct {
	name, uid, ip, node string
	ips                 []string // status.podIPs (ip among them)
	ready               bool     // the pod's Ready condition is True
}

// podOf reads a Sandbox's pod.
func (p *Provider) podOf(ctx context.Context, s *unstructured.Unstructured) (podRef, error) {
	return p.podNamed(ctx, podName(s))
}

// podName is the name of a Sandbox's pod: agent-sandbox's annotation,
// else the Sandbox's own name.
func podName(s *unstructured.Unstructured) string {
	if name := s.GetAnnotations()[annPodName]; name != "" {
		return name
	}
	return s.GetName()
}

// boundPod reads the Sandbox a warm claim bound, by name, and its pod;
// ok when the pod is Ready with an address. The pod is read beside the
// Sandbox under the Sandbox's own name, which is its pod's name unless
// agent-sandbox's annotation says another (then read once that is
// known): two reads in the time of one.
func (p *Provider) boundPod(ctx context.Context, name string) (podRef, bool) {
	type read struct {
		pod podRef
		err error
	}
	guess := make(chan read, 1)
	go func() {
		pod, err := p.podNamed(ctx, name)
		guess <- read{pod, err}
	}()
	s, err := p.c.Resource(gvrSandbox).Namespace(p.ns).Get(ctx, name, metav1.GetOptions{})
	g := <-guess
	if err != nil {
		return podRef{}, false
	}
	pod, err := g.pod, g.err
	if podName(s) != name {
		pod, err = p.podNamed(ctx, podName(s))
	}
	return pod, err == nil && pod.ready && pod.ip != ""
}

// podNamed reads the pod name: its address, node, readiness; not_found
// when it has ended.
func (p *Provider) podNamed(ctx context.Context, name string) (podRef, error) {
	pod, err := p.c.Resource(gvrPod).Namespace(p.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return podRef{}, apiErr("read pod "+name, err)
	}
	return podFrom(pod)
}

// podFrom is what pod says of itself; not_found when it has ended.
func podFrom(pod *unstructured.Unstructured) (podRef, error) {
	name := pod.GetName()
	r := podRef{name: name, uid: string(pod.GetUID())}
	r.ip, _, _ = unstructured.NestedString(pod.Object, "status", "podIP")
	ips, _, _ := unstructured.NestedSlice(pod.Object, "status", "podIPs")
	for _, v := range ips {
		if m, ok := v.(map[string]any); ok {
			if ip, ok := m["ip"].(string); ok && ip != "" {
				r.ips = append(r.ips, ip)
			}
		}
	}
	if len(r.ips) == 0 && r.ip != "" {
		r.ips = []string{r.ip}
	}
	r.node, _, _ = unstructured.NestedString(pod.Object, "spec", "nodeName")
	if cond := condition(pod, "Ready"); cond != nil && cond["status"] == "True" {
		r.ready = true
	}
	phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase")
	if phase == "Failed" || phase == "Succeeded" || pod.GetDeletionTimestamp() != nil {
		reason, _, _ := unstructured.NestedString(pod.Object, "status", "reason")
		return r, fmt.Errorf("pod %s has ended (%s %s): %w", name, phase, reason, errdefs.ErrNotFound)
	}
	return r, nil
}

// currentPod is the pod behind a running sandbox, or not_found (lost)
// when the claim, the Sandbox or the pod is gone, the pod ended (evicted),
// or its node is gone.
func (p *Provider) currentPod(ctx context.Context, id string) (podRef, error) {
	name := id
	c, err := p.c.Resource(gvrClaim).Namespace(p.ns).Get(ctx, id, metav1.GetOptions{})
	switch {
	case err == nil:
		if name, _, _ = unstructured.NestedString(c.Object, "status", "sandbox", "name"); name == "" {
			return podRef{}, fmt.Errorf("sandbox %s: its claim is not bound: %w", id, errdefs.ErrNotFound)
		}
	case !apierrors.IsNotFound(err):
		return podRef{}, apiErr("read the claim", err)
	}
	s, err := p.c.Resource(gvrSandbox).Namespace(p.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return podRef{}, fmt.Errorf("sandbox %s: %w", id, apiErr("read the sandbox", err))
	}
	pod, err := p.podOf(ctx, s)
	if err != nil {
		return podRef{}, fmt.Errorf("sandbox %s (lost): %w", id, err)
	}
	if pod.node != "" {
		_, err := p.c.Resource(gvrNode).Get(ctx, pod.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return podRef{}, fmt.Errorf("sandbox %s (lost): its node %s is gone: %w", id, pod.node, errdefs.ErrNotFound)
		}
		// Any other answer (a role that may not read nodes) leaves the
		// question to the connection.
	}
	return pod, nil
}

// condition is a status condition of u by type, or nil.
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// apiErr says what the API server's answer means in errdefs' terms. A
// server that cannot be reached, or answers that it is overloaded, is
// unavailable (503 at the edge); the daemon stays up.
func apiErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("kubernetes: %s: %w", op, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes: %s: %v: %w", op, err, errdefs.ErrNotFound)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("kubernetes: %s: %v: %w", op, err, errdefs.ErrAlreadyExists)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes: %s: the daemon's account may not (check its role): %v: %w", op, err, errdefs.ErrFailedPrecondition)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("kubernetes: %s: %v: %w", op, err, errdefs.ErrInvalidArgument)
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), unreachable(err):
		return errdefs.Public(fmt.Errorf("kubernetes: %s: the API server is unavailable: %v: %w", op, err, errdefs.ErrUnavailable),
			"The Kubernetes cluster that runs the sandboxes does not answer; retry in a few seconds (the server log has the cause under this request's id).")
	}
	return fmt.Errorf("kubernetes: %s: %v: %w", op, err, errdefs.ErrUnavailable)
}

// unreachable reports a transport failure: no answer from the API server.
func unreachable(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED)
}
