package builds_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
)

// fakeCatalog records by calling run, as templates.Catalog does.
type fakeCatalog struct{}

func (fakeCatalog) Build(ctx context.Context, tenantID string, spec templates.BuildSpec, run func(context.Context) (build.Result, error)) (templates.Template, error) {
	if _, err := run(ctx); err != nil {
		return templates.Template{}, err
	}
	return templates.Template{ID: "t", TenantID: tenantID, Name: spec.Name, Settings: spec.Settings}, nil
}

func (fakeCatalog) Image(context.Context, string, string) (image.Image, error) {
	return image.Image{}, errdefs.ErrNotFound
}

// fakeBuilder writes out and then waits for release (when set) or ctx.
type fakeBuilder struct {
	out     string
	release chan struct{}
	started chan string
	fail    error
}

func (f *fakeBuilder) Build(ctx context.Context, rec *recipe.Recipe, opt build.Options) (build.Result, error) {
	io.WriteString(opt.Output, f.out)
	if f.started != nil {
		f.started <- rec.Steps[0].Image
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return build.Result{}, fmt.Errorf("build: %w", errdefs.ErrDeadlineExceeded)
		}
	}
	return build.Result{}, f.fail
}

func newQueue(t *testing.T, b builds.Builder, mod func(*builds.Config)) *builds.Queue {
	t.Helper()
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := builds.Config{Builder: b, Images: s, Catalog: fakeCatalog{},
		Guard: func(_ context.Context, _, s string) string { return strings.ReplaceAll(s, "sk-SECRET", "[REDACTED]") }}
	if mod != nil {
		mod(&cfg)
	}
	return builds.New(cfg)
}

func from(img string) *recipe.Recipe {
	return &recipe.Recipe{Steps: []recipe.Step{{Kind: recipe.From, Image: img}}}
}

func wait(t *testing.T, b *builds.Build) builds.Snapshot {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if s := b.Snapshot(0); s.Status == builds.Ready || s.Status == builds.Error {
			return s
		}
	}
	t.Fatal("build did not end")
	return builds.Snapshot{}
}

// TestQueueBounds: MaxRunning builds run, the next waits; a build's log
// keeps MaxLogLines lines of MaxLineBytes, guarded; the reason of a
// failure is guarded; a build past its Timeout fails; the context dir
// goes when the build ends; another tenant's build is not found.
func TestQueueBounds(t *testing.T) {
	ctx := context.Background()
	fb := &fakeBuilder{release: make(chan struct{}), started: make(chan string, 4)}
	q := newQueue(t, fb, func(c *builds.Config) { c.MaxRunning = 1 })
	a, err := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "b"}})
	q.Start(ctx, a, from("a"))
	<-fb.started
	q.Start(ctx, b, from("b"))
	time.Sleep(50 * time.Millisecond)
	if s := b.Snapshot(0); s.Status != builds.Waiting {
		t.Errorf("second build with MaxRunning 1: %q, want waiting", s.Status)
	}
	if err := q.Start(ctx, a, from("a")); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("second start: %v", err)
	}
	close(fb.release)
	if s := wait(t, a); s.Status != builds.Ready || s.Template == nil || s.Template.Name != "a" {
		t.Errorf("a: %+v", s)
	}
	wait(t, b)
	if _, err := os.Stat(a.Dir); !os.IsNotExist(err) {
		t.Errorf("context dir after the build: %v", err)
	}
	if _, err := q.Get("t2", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's build: %v", err)
	}

	long := strings.Repeat("x", builds.MaxLineBytes+10)
	lb := &fakeBuilder{out: "sk-SECRET\n" + long + "\n" + strings.Repeat("line\n", builds.MaxLogLines+5),
		fail: fmt.Errorf("RUN failed: printed sk-SECRET: %w", errdefs.ErrFailedPrecondition)}
	q = newQueue(t, lb, nil)
	c, _ := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "c"}})
	q.Start(ctx, c, from("c"))
	s := wait(t, c)
	if s.Status != builds.Error || strings.Contains(s.Reason, "sk-SECRET") || !strings.Contains(s.Reason, "[REDACTED]") {
		t.Errorf("failed build: status %q reason %q", s.Status, s.Reason)
	}
	if len(s.Logs) != builds.MaxLogLines || s.Logs[0].Message != "[REDACTED]" || len(s.Logs[1].Message) != builds.MaxLineBytes+len("…") {
		t.Errorf("log: %d lines, first %q, second of %d bytes", len(s.Logs), s.Logs[0].Message, len(s.Logs[1].Message))
	}
	if got := c.Snapshot(builds.MaxLogLines - 1).Logs; len(got) != 1 {
		t.Errorf("log from an offset: %d entries", len(got))
	}

	q = newQueue(t, &fakeBuilder{release: make(chan struct{})}, func(c *builds.Config) { c.Timeout = 50 * time.Millisecond })
	d, _ := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "d"}})
	q.Start(ctx, d, from("d"))
	if s := wait(t, d); s.Status != builds.Error {
		t.Errorf("build past its timeout: %+v", s)
	}
}

// TestQueuePerTenant: a tenant's unfinished builds are bounded; other
// tenants are not affected; an aborted build no longer counts and its
// context is gone.
func TestQueuePerTenant(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, &fakeBuilder{}, func(c *builds.Config) { c.MaxPerTenant = 2 })
	var mu sync.Mutex
	var reqs []*builds.Build
	for range 2 {
		b, err := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "x"}, Lease: true})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		reqs = append(reqs, b)
		mu.Unlock()
	}
	if _, err := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "x"}}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("third unfinished build: %v, want resource_exhausted", err)
	}
	if _, err := q.Request(ctx, "t2", builds.Request{Spec: templates.BuildSpec{Name: "x"}}); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	q.Abort(reqs[0], "refused")
	if _, err := os.Stat(reqs[0].Dir); !os.IsNotExist(err) {
		t.Errorf("aborted build's context: %v", err)
	}
	if s := reqs[0].Snapshot(0); s.Status != builds.Error || s.Reason != "refused" {
		t.Errorf("aborted build: %+v", s)
	}
	if _, err := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "x"}}); err != nil {
		t.Errorf("after an abort: %v", err)
	}
	if _, err := q.Request(ctx, "t1", builds.Request{Spec: templates.BuildSpec{Name: "../x"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad name: %v", err)
	}
	q.Abort(reqs[1], "done")
}

// TestCheckFrom: a FROM that is no template of the tenant is pulled only
// where the daemon pulls for builds, and never when it is a bare digest
// or a built-in's name (Docker Hub's library/default is not the
// built-in); without pulls every such FROM is not_found, before the
// build is queued.
func TestCheckFrom(t *testing.T) {
	pull := func(context.Context, string, *recipe.RegistryAuth) (image.Image, error) { return image.Image{}, nil }
	digest := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		from  string
		pulls bool
		ok    bool
	}{
		{"python:3.12", false, false},
		{"python:3.12", true, true},
		{digest, true, false},
		{"example.test/x@" + digest, true, true},
		{templates.Default, true, false},
		{templates.Desktop + ":latest", true, false},
	} {
		t.Run(fmt.Sprintf("%s pulls=%v", tc.from, tc.pulls), func(t *testing.T) {
			q := newQueue(t, &fakeBuilder{}, func(c *builds.Config) {
				if tc.pulls {
					c.Pull = pull
				}
			})
			err := q.CheckFrom(context.Background(), "A", from(tc.from))
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("CheckFrom = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
