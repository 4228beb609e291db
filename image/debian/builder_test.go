package debian_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// stages are a staged template's stages, built by fake.
func stages(fake *debiantest.Fake) []debian.Stage {
	return []debian.Stage{
		{Name: "core", Config: debian.Config{Packages: []string{"python3"}, Variant: "essential", Mmdebstrap: fake.Path}},
		{Name: "full", Config: debian.Config{Packages: []string{"python3", "python3-numpy"}, Mmdebstrap: fake.Path}},
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, time.Minute, cond)
}

// stageOf is what the image d holds in /stage (the fake's marker).
func stageOf(t *testing.T, s *image.Store, b *debian.Builder) string {
	t.Helper()
	d, ok := b.Image()
	if !ok {
		return ""
	}
	img, err := s.Get(context.Background(), d.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(img.LowerDirs()[0], "stage"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestStagedBuilder: a template built in stages has no image while its
// first stage builds (a use is unavailable, to be retried after
// RetryAfter, with the stage, step and packages set up), is served by the
// core once it is built while the full image builds, then by the full
// image; each stage names the template in the store. A new builder over
// the store serves the full image at once and builds nothing; one over a
// store whose last run stopped after the core serves the core at once
// and builds the full image only.
func TestStagedBuilder(t *testing.T) {
	testenv.RequireRoot(t) // builds run mmdebstrap in a mount namespace
	ctx := context.Background()
	fake := debiantest.NewFake(t)
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := debian.NewStaged(ctx, s, "tpl", stages(fake), nil)
	var servedMu sync.Mutex
	var served []v1.Hash
	b.OnServe(func(d v1.Hash) { servedMu.Lock(); served = append(served, d); servedMu.Unlock() })
	fake.Reached(t, "core")
	if _, ok := b.Image(); ok {
		t.Fatal("an image before the first stage is built")
	}
	st := b.Status()
	if !st.Building || st.Stage != "core" || st.StageIndex != 1 || st.Stages != 2 || st.Progress.Phase != "installing packages" ||
		st.Progress.Done != debiantest.FakeDone || st.Progress.Total != debiantest.FakeTotal || st.Progress.Package != "python3-numpy" {
		t.Errorf("status while the core builds: %+v", st)
	}
	err = b.Missing("tpl")
	if d, ok := errdefs.RetryAfter(err); !errors.Is(err, errdefs.ErrUnavailable) || !ok || d != debian.RetryAfter {
		t.Errorf("Missing while building = %v (retry after %v %v), want unavailable with Retry-After", err, d, ok)
	}
	for _, want := range []string{"stage core 1/2", "step 5/10 installing packages", "1/4 packages set up"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Missing = %v, want it to say %q", err, want)
		}
	}
	if err := b.Missing("other"); err != nil {
		t.Errorf("Missing of another template: %v", err)
	}

	fake.Release(t, "core", false)
	waitFor(t, "the core to serve", func() bool { _, ok := b.Image(); return ok })
	if got := stageOf(t, s, b); got != "core" {
		t.Errorf("serving %q, want the core", got)
	}
	fake.Reached(t, "full")
	st = b.Status()
	if st.Live != "core" || !st.Building || st.Stage != "full" || st.StageIndex != 2 {
		t.Errorf("status while the full image builds: %+v", st)
	}
	if err := b.Missing("tpl"); err != nil {
		t.Errorf("Missing while the core serves: %v", err)
	}
	core, _ := b.Image()
	if d, err := s.Resolve(ctx, "tpl"); err != nil || d != core {
		t.Errorf("the store names tpl %s (%v), want the core %s", d, err, core)
	}

	fake.Release(t, "full", false)
	waitFor(t, "the full image to serve", func() bool { return b.Status().Live == "full" })
	if got := stageOf(t, s, b); got != "full" {
		t.Errorf("serving %q, want the full image", got)
	}
	waitFor(t, "the build to end", func() bool { return !b.Status().Building })
	full, _ := b.Image()
	servedMu.Lock()
	if !slices.Equal(served, []v1.Hash{core, full}) {
		t.Errorf("OnServe told %v, want the core %s then the full image %s", served, core, full)
	}
	servedMu.Unlock()
	if d, err := s.Resolve(ctx, "tpl"); err != nil || d != full {
		t.Errorf("the store names tpl %s (%v), want the full image %s", d, err, full)
	}
	if got := fake.Calls(); !slices.Equal(got, []string{"core", "full"}) {
		t.Errorf("builds %q, want core then full", got)
	}
	if _, err := s.Resolve(ctx, debian.CachePrefix+stages(fake)[0].Config.Key()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the core keeps its cache name once the full image serves (%v): GC would never take it", err)
	}

	// A restart: the full image serves at once, nothing builds.
	again := debian.NewStaged(ctx, s, "tpl", stages(fake), nil)
	if d, ok := again.Image(); !ok || d != full || again.Status().Live != "full" || again.Status().Building {
		t.Errorf("after a restart: %+v", again.Status())
	}

	// A run that stopped after the core: the core serves at once and
	// only the full image is built.
	fake2 := debiantest.NewFake(t)
	s2, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fake2.Release(t, "core", false)
	if _, err := debian.Ensure(ctx, s2, stages(fake2)[0].Config, "tpl", nil); err != nil {
		t.Fatal(err)
	}
	resumed := debian.NewStaged(ctx, s2, "tpl", stages(fake2), nil)
	if st := resumed.Status(); !st.Ready || st.Live != "core" {
		t.Errorf("resumed after the core: %+v", st)
	}
	fake2.Reached(t, "full")
	if got := fake2.Calls(); !slices.Equal(got, []string{"core", "full"}) {
		t.Errorf("builds %q, want the core (by the test) and the full image only", got)
	}
	fake2.Release(t, "full", false)
	waitFor(t, "the resumed full image", func() bool { return resumed.Status().Live == "full" })
}

// TestStagedBuilderFailure: a failed first stage makes a use
// failed_precondition, not a wait; a failed later stage leaves the
// earlier one serving and is reported.
func TestStagedBuilderFailure(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	fake := debiantest.NewFake(t)
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := debian.NewStaged(ctx, s, "tpl", stages(fake), nil)
	fake.Reached(t, "core")
	fake.Release(t, "core", true)
	waitFor(t, "the failure", func() bool { return b.Status().Err != nil })
	if err := b.Missing("tpl"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Missing after a failed build = %v, want failed_precondition", err)
	} else if _, retry := errdefs.RetryAfter(err); retry {
		t.Error("a failure asks to be retried like a build under way")
	}

	fake2 := debiantest.NewFake(t)
	s2, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b2 := debian.NewStaged(ctx, s2, "tpl", stages(fake2), nil)
	fake2.Release(t, "core", false)
	fake2.Reached(t, "full")
	fake2.Release(t, "full", true)
	waitFor(t, "the full stage's failure", func() bool { return b2.Status().Err != nil })
	if st := b2.Status(); !st.Ready || st.Live != "core" || st.Building {
		t.Errorf("after the full stage failed: %+v", st)
	}
	if err := b2.Missing("tpl"); err != nil {
		t.Errorf("Missing with the core serving: %v", err)
	}
}

// TestBuildLogsSteadily: while a step is silent (a maintainer script that
// runs for a minute without a line), the build still logs its state at
// least every 10 s, with the packages set up and the one at work.
func TestBuildLogsSteadily(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	fake := debiantest.NewFake(t)
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &records{}
	debian.NewStaged(ctx, s, "tpl", stages(fake), slog.New(rec))
	fake.Reached(t, "core")
	// The fake is silent from here: the step's first line, then one every 5 s.
	waitFor(t, "two log lines of the silent step", func() bool { return rec.count("installing packages") >= 3 })
	lines := rec.matching("installing packages")
	for i := 1; i < len(lines); i++ {
		if gap := lines[i].Time.Sub(lines[i-1].Time); gap > 10*time.Second {
			t.Errorf("%s between two lines of a step", gap)
		}
	}
	last := lines[len(lines)-1]
	attrs := map[string]string{}
	last.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	for k, v := range map[string]string{"stage": "core", "done": "1", "total": "4", "package": "python3-numpy"} {
		if attrs[k] != v {
			t.Errorf("log line %s = %q, want %q (%v)", k, attrs[k], v, attrs)
		}
	}
	fake.Release(t, "core", true)
}

// records is a slog handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) matching(phase string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "phase" && a.Value.String() == phase {
				out = append(out, rec)
				return false
			}
			return true
		})
	}
	return out
}

func (r *records) count(phase string) int { return len(r.matching(phase)) }

// TestBuildDoesNotWaitForCleanup: once mmdebstrap has handed the whole
// tarball over and removes its temporary tree (tens of seconds of a build
// under load), the image is stored and served without waiting for that.
func TestBuildDoesNotWaitForCleanup(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	fake := debiantest.NewFake(t)
	fake.HoldExit(t)
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := debian.NewStaged(ctx, s, "tpl", stages(fake), nil)
	fake.Release(t, "core", false)
	waitFor(t, "the core to serve while mmdebstrap removes its tree", func() bool { _, ok := b.Image(); return ok })
	if !fake.Holding("core") {
		t.Error("the fake mmdebstrap is not holding: the test proves nothing")
	}
	if got := stageOf(t, s, b); got != "core" {
		t.Errorf("serving %q, want the core", got)
	}
	fake.ReleaseExit(t, "core")
}

// TestFailedBuildStoresNothing: mmdebstrap says it removes its temporary
// tree after a failure too, before any tarball; such a build is a failure,
// and nothing is stored under the recipe's key. Before, the build took the
// line for the tarball's end and stored an image of no files (the desktop
// image of a failed build, found cached by every later run).
func TestFailedBuildStoresNothing(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	fake := filepath.Join(dir, "mmdebstrap")
	script := "#!/bin/sh\necho 'I: running apt-get update...' >&2\necho 'E: setup failed: the mirror went away' >&2\n" +
		"echo 'I: removing tempdir /tmp/mmdebstrap.x...' >&2\nsleep 1\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := image.Open(t.TempDir(), image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := debian.Config{Mmdebstrap: fake}
	if _, err := debian.Build(context.Background(), s, cfg, nil); err == nil || !strings.Contains(err.Error(), "the mirror went away") {
		t.Fatalf("a failed build: %v", err)
	}
	if _, err := s.Get(context.Background(), debian.CachePrefix+cfg.Key()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a failed build stored an image: %v", err)
	}
}
