package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/agent/podchannel"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Create implements contexts.Provider: a claim on the template's warm
// pool when it has a ready pod and the spec's limits are the pool's, else
// a cold Sandbox; then the pod's agent is enrolled with a new key and the
// context's configuration, and connected.
func (p *Provider) Create(ctx context.Context, spec contexts.Spec) (_ contexts.Sandbox, err error) {
	if len(spec.Volumes) > 0 {
		return nil, errdefs.Sentence(errdefs.ErrFailedPrecondition, "volumes are not supported by provider kubernetes")
	}
	t, err := p.template(spec.Template)
	if err != nil {
		return nil, err
	}
	for k, v := range spec.Env {
		// What the agent's environment takes (env.set): an enrollment
		// with another name would be refused after the pod was claimed.
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("sandbox env: invalid environment variable %q (letters, digits and _): %w", k, errdefs.ErrInvalidArgument)
		}
	}
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	if err := p.ensureTemplate(ctx, t); err != nil {
		return nil, err
	}
	if t.pool > 0 {
		p.startCache()
	}
	start := time.Now()
	lim := p.limitsFor(t, spec.Limits)
	ctx, cancel := context.WithTimeout(ctx, p.ready)
	defer cancel()
	// The pool's status is read beside the network's setup (a store read,
	// a CA made), which does not depend on it.
	pooled := make(chan bool, 1)
	if t.pool > 0 && lim == p.poolLimits(t) {
		go func() { pooled <- p.poolReady(ctx, t) }()
	} else {
		pooled <- false
	}
	id := NewID()
	defer func() {
		if err != nil {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer dcancel()
			if derr := p.Destroy(dctx, id); derr != nil {
				p.log.Warn("cleanup after failed create", logkey.Sandbox, id, logkey.Err, derr)
			}
		}
	}()
	nw, err := p.network(ctx, id, spec, env)
	warm := <-pooled
	if err != nil {
		return nil, err
	}
	labels, annotations := meta(id, t.name, spec.Labels)
	key := newKey()
	var enrollKey []byte
	if !warm {
		enrollKey = newKey()
	}
	// A warm pod mounts the pool's key, not this Secret: the claim goes
	// out beside it. A cold pod mounts it, so it is made first.
	type created struct {
		u   *unstructured.Unstructured
		err error
	}
	claimed := make(chan created, 1)
	var claim *unstructured.Unstructured
	if warm {
		go func() {
			u, err := p.c.Resource(gvrClaim).Namespace(p.ns).Create(ctx, p.claim(id, t.name, labels, annotations), metav1.CreateOptions{})
			claimed <- created{u, apiErr("create the claim", err)}
		}()
	}
	secret, serr := p.c.Resource(gvrSecret).Namespace(p.ns).Create(ctx, p.keySecret(id, key, enrollKey, nw.ca, labels, annotations), metav1.CreateOptions{})
	if warm {
		c := <-claimed
		if err := errors.Join(apiErr("create the key secret", serr), c.err); err != nil {
			return nil, err
		}
		claim = c.u
	} else {
		if serr != nil {
			return nil, apiErr("create the key secret", serr)
		}
		prestart := mergePrestart(p.prestart, spec.Prestart)
		if _, err := p.c.Resource(gvrSandbox).Namespace(p.ns).Create(ctx, p.coldSandbox(id, t, lim, prestart, !nw.proxied, labels, annotations), metav1.CreateOptions{}); err != nil {
			return nil, apiErr("create the sandbox", err)
		}
	}
	objects := time.Now()
	bound := objects
	// A warm pod's enrollment is begun as soon as the bound claim names
	// its address, beside the pod's read (early).
	// So is the label of a warm pod of network mode none, by the pod's
	// name as the claim's Sandbox gives it (checked against the read).
	var pre *early
	var labelledEarly chan labelled
	onBound := func(c *unstructured.Unstructured) {
		if ip := claimIP(c); ip != "" {
			pre = p.beginEnroll(ctx, t, ip)
		}
		if !nw.proxied {
			name, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name")
			labelledEarly = make(chan labelled, 1)
			go func() { labelledEarly <- p.labelNoEgressEarly(ctx, name) }()
		}
	}
	defer func() {
		if pre != nil {
			pre.drop()
		}
	}()
	pod, err := p.waitReady(ctx, id, claim, &bound, onBound)
	if err != nil {
		return nil, err
	}
	ready := time.Now()
	// The pod's uid goes on the key Secret beside the enrollment, not
	// before it: it is needed only once the create returns (Attach).
	recordedAt, labelledAt := ready, ready // for the debug line
	recorded := make(chan error, 1)
	go func() {
		err := p.recordPod(ctx, id, pod, secret)
		recordedAt = time.Now()
		recorded <- err
	}()
	defer func() {
		if recorded != nil {
			<-recorded
		}
	}()
	// A claimed warm pod of network mode none is labelled beside its
	// enrollment, which runs nothing in it: the create returns, and so
	// the context's first code runs, only once the label is on the pod
	// the read found (from then on the pod reaches nothing).
	isLabelled := make(chan error, 1)
	if warm && !nw.proxied {
		go func() {
			var err error
			var l labelled
			if labelledEarly != nil {
				l = <-labelledEarly
			}
			if l.uid == "" || l.err != nil || l.name != pod.name || l.uid != pod.uid {
				err = p.labelNoEgress(ctx, pod)
			}
			labelledAt = time.Now()
			isLabelled <- err
		}()
	} else {
		isLabelled <- nil
	}
	defer func() {
		if isLabelled != nil {
			<-isLabelled
		}
	}()
	if warm {
		enrollKey, err = p.poolKey(ctx, t)
		if err != nil {
			return nil, err
		}
	}
	addr := net.JoinHostPort(pod.ip, strconv.Itoa(p.port))
	ccfg := agent.ClientConfig{SandboxID: id, Key: key, Logger: p.log}
	// The enrollment's connection becomes the session (one TLS
	// connection, agent.EnrollSession).
	c, usedEarly, err := p.enroll(ctx, pre, pod, enrollKey, agent.Enrollment{Key: key, Env: env, CACerts: nw.caCert}, ccfg)
	if err != nil {
		if warm {
			p.forgetPoolKey(t)
		}
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	enrolled := time.Now()
	if c == nil {
		// An agent that closes the enrollment's connection (a pod image
		// made before one-connection enrollments): a connection of its own.
		if err := retryDial(ctx, func() (err error) {
			c, err = podchannel.DialPod(ctx, addr, ccfg)
			return err
		}); err != nil {
			return nil, err
		}
		if err := c.Ping(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	connected := time.Now()
	err, recorded = <-recorded, nil
	if lerr := <-isLabelled; lerr != nil {
		err = errors.Join(err, lerr)
	}
	isLabelled = nil
	if err != nil {
		c.Close()
		return nil, err
	}
	ms := func(a, b time.Time) int64 { return b.Sub(a).Milliseconds() }
	p.log.Debug("sandbox ready", logkey.Sandbox, id, "warm", warm, "early", usedEarly, "pod", pod.name,
		"objects_ms", ms(start, objects), "bound_ms", ms(objects, bound), "ready_ms", ms(bound, ready), "enroll_ms", ms(ready, enrolled),
		"connect_ms", ms(enrolled, connected), "record_ms", ms(connected, time.Now()),
		"recorded_ms", ms(ready, recordedAt), "labelled_ms", ms(ready, labelledAt))
	return &Sandbox{c}, nil
}

// Prepare makes the objects of every configured template with a pool
// (kubernetes.go's mapping), so that their warm pods are ready before the
// first create, and starts the copy of the objects claims read (objCache);
// a create does both too when they are missing. The daemon
// calls it at start, in the background: the API server may be down then.
func (p *Provider) Prepare(ctx context.Context) error {
	var errs []error
	pooled := false
	for name, t := range p.templates {
		if t.Pool <= 0 {
			continue
		}
		pooled = true
		tc, err := p.template(name)
		if err == nil {
			err = p.ensureTemplate(ctx, tc)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("template %s: %w", name, err))
		}
	}
	if pooled {
		// Filled before the first claim, which then reads its pod here.
		p.startCache()
	}
	return errors.Join(errs...)
}

// poolReady reports whether t's warm pool has a ready pod to claim. An
// empty pool (still filling, or drained) gets a cold Sandbox of the
// create's own rather than a claim, which agent-sandbox would serve cold
// from the template with the pool's key; an answer that does not come is
// taken as empty. Another replica may take the last pod first: the claim
// is then served cold by agent-sandbox, and enrolled the same way.
func (p *Provider) poolReady(ctx context.Context, t templateConf) bool {
	u, err := p.c.Resource(gvrWarmPool).Namespace(p.ns).Get(ctx, objectName(t.name), metav1.GetOptions{})
	if err != nil {
		return false
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	return n > 0
}

// recordPod writes the uid of the pod the sandbox was enrolled in on its
// key Secret: another pod behind the same Sandbox is a lost sandbox.
// created is the Secret as this create made it: it is updated as it is,
// one call rather than a read and an update; a conflict (it changed
// since) reads it again.
func (p *Provider) recordPod(ctx context.Context, id string, pod podRef, created *unstructured.Unstructured) error {
	r := p.c.Resource(gvrSecret).Namespace(p.ns)
	s := created
	for {
		if s == nil {
			var err error
			if s, err = r.Get(ctx, id, metav1.GetOptions{}); err != nil {
				return apiErr("read the key secret", err)
			}
		}
		s = s.DeepCopy()
		a := s.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[annPodUID] = pod.uid
		s.SetAnnotations(a)
		_, err := r.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil && apierrors.IsConflict(err) && created != nil {
			s, created = nil, nil // once more, from a read
			continue
		}
		if err != nil {
			return apiErr("update the key secret", err)
		}
		return nil
	}
}

// dialRetry bounds how long a connection to a pod that is refused or
// unanswered is tried again. The policy enforcer applies a pod's new
// labels (a claimed pod of network mode none) asynchronously: kube-router
// rejects connections from sandlot's pods for a moment while it moves
// the pod to its new policy, so an enrollment or attach right after the
// label would fail.
const dialRetry = 10 * time.Second

// retryDial runs dial, again every 100 ms within dialRetry (and ctx) while
// it fails to connect at all: nothing reached the agent, so trying again
// is safe (an enrollment is taken once).
func retryDial(ctx context.Context, dial func() error) error {
	deadline := time.Now().Add(dialRetry)
	for {
		err := dial()
		var op *net.OpError
		if err == nil || !errors.As(err, &op) || op.Op != "dial" || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
