package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sandlot/sandlot/errdefs"
)

// waitReady waits, within ctx, for the sandbox's pod to be ready: a claim
// bound to a Sandbox, or the cold Sandbox itself, Ready with a pod IP. A
// pod the scheduler cannot place fails at once with resource_exhausted.
// Each object is watched, so a change is seen when the API server sends
// it rather than at the next poll. claim is the warm claim as its create
// returned it (nil for a cold Sandbox): its watch starts from that
// version, without a read first. bound is set when a warm claim is bound
// (the phase the create's debug line reports), and onBound, when set, is
// given the bound claim before its pod is read.
func (p *Provider) waitReady(ctx context.Context, id string, claim *unstructured.Unstructured, bound *time.Time, onBound func(*unstructured.Unstructured)) (podRef, error) {
	warm := claim != nil
	last := "no status yet"
	fail := func(err error) (podRef, error) {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return podRef{}, fmt.Errorf("sandbox %s was not ready within %s (%s): %w", id, p.ready, last, errdefs.ErrDeadlineExceeded)
		}
		return podRef{}, err
	}
	name := id
	if warm {
		last = "the claim is not bound"
		c, err := p.watchUntil(ctx, gvrClaim, id, claim, func(c *unstructured.Unstructured) (bool, error) {
			if cond := condition(c, "Ready"); cond != nil && cond["status"] == "False" {
				switch cond["reason"] {
				case "TemplateNotFound", "WarmPoolNotFound", "VolumeClaimTemplatesError":
					return false, fmt.Errorf("sandbox %s: claim: %s: %s: %w", id, cond["reason"], cond["message"], errdefs.ErrFailedPrecondition)
				}
			}
			n, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name")
			return n != "", nil
		})
		if err != nil {
			return fail(err)
		}
		name, _, _ = unstructured.NestedString(c.Object, "status", "sandbox", "name")
		*bound = time.Now()
		if onBound != nil {
			onBound(c)
		}
		// A claim binds a warm pool's Sandbox whose pod already runs and
		// is Ready (the agent answers its probe); the controller's
		// adoption refreshes the Sandbox's own status some 100 ms later.
		// The pod's readiness is the fact needed: take it when it is so,
		// from this process's copy of the objects when it has them
		// (objCache), else from two reads.
		if pod, ok := p.cache.boundPod(name); ok {
			return pod, nil
		}
		if pod, ok := p.boundPod(ctx, name); ok {
			return pod, nil
		}
	}
	last = "its pod is not ready"
	s, err := p.watchUntil(ctx, gvrSandbox, name, nil, func(s *unstructured.Unstructured) (bool, error) {
		if cond := condition(s, "PodScheduled"); cond != nil && cond["status"] == "False" && cond["reason"] == "Unschedulable" {
			return false, fmt.Errorf("sandbox %s: the cluster is out of capacity: its pod cannot be scheduled: %s: %w", id, cond["message"], errdefs.ErrResourceExhausted)
		}
		if cond := condition(s, "Finished"); cond != nil && cond["status"] == "True" {
			return false, fmt.Errorf("sandbox %s: its pod ended before it was ready (%s: %s): %w", id, cond["reason"], cond["message"], errdefs.ErrUnavailable)
		}
		cond := condition(s, "Ready")
		return cond != nil && cond["status"] == "True", nil
	})
	if err != nil {
		return fail(err)
	}
	pod, err := p.podOf(ctx, s)
	if err == nil && pod.ip != "" {
		return pod, nil
	}
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fail(err)
	}
	// The Sandbox says Ready before its pod has an address (or before
	// this replica's read of the pod shows it): wait for the pod.
	last = "its pod has no IP yet"
	if _, err := p.watchUntil(ctx, gvrPod, podName(s), nil, func(u *unstructured.Unstructured) (bool, error) {
		ip, _, _ := unstructured.NestedString(u.Object, "status", "podIP")
		return ip != "", nil
	}); err != nil {
		return fail(err)
	}
	pod, err = p.podOf(ctx, s)
	if err != nil {
		return fail(err)
	}
	return pod, nil
}

// watchUntil returns the object gvr/name once done says so, reading it
// once and then watching it from that read's version: a change is seen
// when the API server sends it. from, when set, is the object as a write
// of this process returned it, which stands for the first read (one
// round trip less). An object not made yet is waited for; a watch the
// server closes (its timeout, a compaction) is opened again from a new
// read. done's error ends the wait.
func (p *Provider) watchUntil(ctx context.Context, gvr schema.GroupVersionResource, name string, from *unstructured.Unstructured, done func(*unstructured.Unstructured) (bool, error)) (*unstructured.Unstructured, error) {
	r := p.c.Resource(gvr).Namespace(p.ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	what := gvr.Resource + " " + name
	for {
		var items []unstructured.Unstructured
		var version string
		if from != nil && from.GetName() == name && from.GetResourceVersion() != "" {
			items, version = []unstructured.Unstructured{*from}, from.GetResourceVersion()
		} else {
			l, err := r.List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				return nil, apiErr("read "+what, err)
			}
			items, version = l.Items, l.GetResourceVersion()
		}
		from = nil // a watch that ends is opened again from a read
		for i := range items {
			if u := &items[i]; u.GetName() == name {
				if ok, err := done(u); ok || err != nil {
					return u, err
				}
			}
		}
		w, err := r.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: version})
		if err != nil {
			return nil, apiErr("watch "+what, err)
		}
		u, err := p.events(ctx, w, name, done)
		w.Stop()
		if u != nil || err != nil {
			return u, err
		}
	}
}

// events reads w until done accepts name's object (returned), done or
// the watch fails (error), or the watch ends (nil, nil: read again).
func (p *Provider) events(ctx context.Context, w watch.Interface, name string, done func(*unstructured.Unstructured) (bool, error)) (*unstructured.Unstructured, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			switch ev.Type {
			case watch.Error:
				if st := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
					return nil, nil // read again
				}
				return nil, apiErr("watch "+name, apierrors.FromObject(ev.Object))
			case watch.Added, watch.Modified:
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || u.GetName() != name {
					continue
				}
				if ok, err := done(u); ok || err != nil {
					return u, err
				}
			}
		}
	}
}
