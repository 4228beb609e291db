package kubernetes

import (
	"context"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// objCache is this process's copy of the namespace's Sandboxes and
// sandbox pods (labelRole), kept by one list and one watch of each
// (client-go informers). A claim binds a warm Sandbox whose pod has been
// running, Ready, for a while: its name, address and uid are here when
// the binding is seen, where reading them took two API requests (20-50
// ms each on a loaded cluster). What the copy lacks, or shows not ready,
// is read from the API server as before. It is not the last word on a
// pod: the enrollment that follows proves the agent at that address holds
// the pool's key, and a pod that ended is not taken (podFrom).
type objCache struct {
	ns              string
	sandboxes, pods cache.SharedIndexInformer
	ctx             context.Context // ended by Close: the copy is no longer kept
	cancel          context.CancelFunc
}

// startCache starts the provider's objCache once; it fills in the
// background (boundPod answers nothing until both lists are in).
func (p *Provider) startCache() *objCache {
	p.cacheOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(p.c, 0, p.ns, nil)
		pf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(p.c, 0, p.ns, func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{labelRole: roleSandbox}.String()
		})
		o := &objCache{ns: p.ns, ctx: ctx, sandboxes: f.ForResource(gvrSandbox).Informer(), pods: pf.ForResource(gvrPod).Informer(), cancel: cancel}
		for _, inf := range []cache.SharedIndexInformer{o.sandboxes, o.pods} {
			// What is read here is status, annotations and names: the
			// field managers' records are most of an object's size.
			_ = inf.SetTransform(withoutManagedFields)
		}
		f.Start(ctx.Done())
		pf.Start(ctx.Done())
		p.cache = o
	})
	return p.cache
}

// withoutManagedFields is obj without metadata.managedFields, as a new
// object over the same values: the object given may be shared (client-go's
// fake hands out what it stores), so it is not changed, and nothing but
// the two maps on the way to the field is copied.
func withoutManagedFields(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	meta, ok := u.Object["metadata"].(map[string]any)
	if _, has := meta["managedFields"]; !ok || !has {
		return u, nil
	}
	meta = maps.Clone(meta)
	delete(meta, "managedFields")
	top := maps.Clone(u.Object)
	top["metadata"] = meta
	return &unstructured.Unstructured{Object: top}, nil
}

// Close stops the provider's watches (objCache); creates after it read
// the API server only, not a copy no longer kept.
func (p *Provider) Close() {
	p.cacheOnce.Do(func() {}) // none starts after this
	if p.cache != nil {
		p.cache.cancel()
	}
}

// boundPod is the pod of the Sandbox name as this copy holds them, when
// both lists are in and still kept, the Sandbox and its pod (podName) are
// there, and the pod is Ready with an address; ok false otherwise (read
// the API server).
func (o *objCache) boundPod(name string) (podRef, bool) {
	if o == nil || o.ctx.Err() != nil || !o.sandboxes.HasSynced() || !o.pods.HasSynced() {
		return podRef{}, false
	}
	s, ok := o.get(o.sandboxes, name)
	if !ok {
		return podRef{}, false
	}
	u, ok := o.get(o.pods, podName(s))
	if !ok || u.GetLabels()[labelRole] != roleSandbox {
		return podRef{}, false // the watch's selector says so too
	}
	pod, err := podFrom(u)
	return pod, err == nil && pod.ready && pod.ip != ""
}

// get is the object name of the watched namespace, as the copy holds it.
func (o *objCache) get(inf cache.SharedIndexInformer, name string) (*unstructured.Unstructured, bool) {
	obj, exists, err := inf.GetStore().GetByKey(o.ns + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}
