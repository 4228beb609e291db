package chain

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/contexts/contextstest"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
)

// recorder is a provider that performs every optional operation and
// records each call it gets by sandbox id ("Pause sb7").
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) saw(call string) {
	r.mu.Lock()
	r.calls = append(r.calls, call)
	r.mu.Unlock()
}

func (r *recorder) Name() string                        { return "rec" }
func (r *recorder) Capabilities() contexts.Capabilities { return ^contexts.Capabilities(0) }
func (r *recorder) Create(context.Context, contexts.Spec) (contexts.Sandbox, error) {
	return nil, errdefs.ErrUnavailable
}
func (r *recorder) List(context.Context) ([]string, error) { return nil, nil }
func (r *recorder) Attach(_ context.Context, id string) (contexts.Sandbox, error) {
	r.saw("Attach " + id)
	return contextstest.NewProvider().Create(context.Background(), contexts.Spec{})
}
func (r *recorder) Destroy(_ context.Context, id string) error { r.saw("Destroy " + id); return nil }
func (r *recorder) Pause(_ context.Context, id string) error   { r.saw("Pause " + id); return nil }
func (r *recorder) Resume(_ context.Context, id string) error  { r.saw("Resume " + id); return nil }
func (r *recorder) Usage(_ context.Context, id string) (contexts.ResourceUsage, error) {
	r.saw("Usage " + id)
	return contexts.ResourceUsage{PIDs: 7}, nil
}

// notByID are the methods of contexts.Provider that name no sandbox, and
// how the chain serves them is tested elsewhere (Capabilities below,
// Create and List in TestRouting and the fallback tests).
var notByID = map[string]bool{"Name": true, "Capabilities": true, "Create": true, "List": true}

// TestChainRoutesEveryOperation: every method of the provider contract
// that acts on a sandbox by id, found by reflection so that an operation
// added to the contract is covered without editing this test, reaches
// the provider that made the sandbox with its own id, through a chain
// in which another provider comes first.
func TestChainRoutesEveryOperation(t *testing.T) {
	rec := &recorder{}
	c := New([]contexts.Provider{&fakeProvider{name: "other"}, rec}, Config{})
	ctxType, strType := reflect.TypeFor[context.Context](), reflect.TypeFor[string]()
	pt := reflect.TypeFor[contexts.Provider]()
	var want []string
	for i := range pt.NumMethod() {
		m := pt.Method(i)
		if notByID[m.Name] {
			continue
		}
		if m.Type.NumIn() < 2 || m.Type.In(0) != ctxType || m.Type.In(1) != strType {
			t.Errorf("contexts.Provider.%s takes no (ctx, sandboxID): say in this test how the chain serves it", m.Name)
			continue
		}
		args := []reflect.Value{reflect.ValueOf(context.Background()), reflect.ValueOf("rec:sb7")}
		for j := 2; j < m.Type.NumIn(); j++ {
			args = append(args, reflect.Zero(m.Type.In(j)))
		}
		out := reflect.ValueOf(c).MethodByName(m.Name).Call(args)
		if err, _ := out[len(out)-1].Interface().(error); err != nil {
			t.Errorf("chain %s: %v", m.Name, err)
		}
		want = append(want, m.Name+" sb7")
	}
	if d := cmp.Diff(want, rec.calls); d != "" {
		t.Fatalf("calls the provider behind the chain got (-want +got):\n%s", d)
	}
}

// TestChainCapabilities: a chain over each provider reports at least
// what that provider does (a chain of several, what any of them does),
// and an operation the sandbox's own provider lacks answers its
// NotSupported, naming that provider.
func TestChainCapabilities(t *testing.T) {
	providers := []contexts.Provider{
		&recorder{},
		contextstest.NewProvider(),
		&contextstest.Provider{Without: contexts.CapPause},
		e2b.New(e2b.Config{}),
		&fakeProvider{name: "plain"},
		&pausingProvider{fakeProvider: fakeProvider{name: "pausing"}},
	}
	var union contexts.Capabilities
	for _, p := range providers {
		union |= p.Capabilities()
		t.Run(p.Name()+"/"+p.Capabilities().String(), func(t *testing.T) {
			if got := New([]contexts.Provider{p}, Config{}).Capabilities(); got != p.Capabilities() {
				t.Fatalf("chain over %s reports %s, want %s", p.Name(), got, p.Capabilities())
			}
		})
	}
	// Shared is every provider's or none: one node-bound provider makes
	// the chain's sandboxes node-bound.
	if got, want := New(providers, Config{}).Capabilities(), union&^contexts.CapShared; got != want {
		t.Fatalf("chain over all reports %s, want %s", got, want)
	}
	if got := New([]contexts.Provider{&recorder{}, e2b.New(e2b.Config{})}, Config{}).Capabilities(); !got.Has(contexts.CapShared) {
		t.Fatalf("chain over two shared providers reports %s, want shared", got)
	}

	c := New([]contexts.Provider{&recorder{}, e2b.New(e2b.Config{}), &fakeProvider{name: "plain"}}, Config{})
	ctx := context.Background()
	err := c.Pause(ctx, "e2b:abc")
	if !errors.Is(err, contexts.ErrNotSupported) || !errors.Is(err, errdefs.ErrFailedPrecondition) || err.Error() != "pause is not supported by provider e2b" {
		t.Fatalf("pause of an e2b sandbox through the chain: %v", err)
	}
	if _, err := c.Usage(ctx, "plain:abc"); !errors.Is(err, contexts.ErrNotSupported) || err.Error() != "usage is not supported by provider plain" {
		t.Fatalf("usage of a plain sandbox through the chain: %v", err)
	}
	// The e2b provider samples usage: without a key it says so.
	if _, err := c.Usage(ctx, "e2b:abc"); !errors.Is(err, e2b.ErrNoAPIKey) {
		t.Fatalf("usage of an e2b sandbox through the chain, no key: %v", err)
	}
	if u, err := c.Usage(ctx, "rec:abc"); err != nil || u.PIDs != 7 {
		t.Fatalf("usage of the recorder's sandbox through the chain: %+v, %v", u, err)
	}
}
