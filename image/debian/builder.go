package debian

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/internal/logkey"
)

// retryAfter is how long a failed build is reported before the next use
// starts another (a mirror that was down may be back).
const retryAfter = time.Minute

// RetryAfter is what a caller of a template being built is told to wait
// before asking again (errdefs.Retry, the Retry-After header).
const RetryAfter = 10 * time.Second

// Logging cadence of a build: a line at every step, and while a step runs
// one every logEvery (a maintainer script can be silent for a minute).
const logEvery = 5 * time.Second

// Stage is one image of a template built in stages: each serves from
// when it is built until the next one is.
type Stage struct {
	// Name is what the stage is called where the live one is reported
	// ("core", "full"); "" for a template of one stage.
	Name   string
	Config Config
}

// Builder makes sure a store has the image of one built-in template,
// named after the template, building it from Debian's mirror. A template
// of several stages (the default: a small core, then the full image) is
// served by each stage once it is built, so the first sandboxes do not
// wait for the longest build. Safe for concurrent use.
type Builder struct {
	store  *image.Store
	name   string
	stages []Stage
	log    *slog.Logger
	ctx    context.Context // the daemon's: a build ends with it

	mu       sync.Mutex
	building bool
	next     int // the stage the build makes (or made last)
	progress Progress
	reported time.Time // when progress came
	err      error
	failedAt time.Time
	image    v1.Hash // the image the template is, once there is one (Image)
	live     string  // which stage image is: a Stage.Name, or "previous"
	ready    bool
	onServe  func(v1.Hash)
}

// OnServe sets fn, told of every image a build of this builder makes the
// template's from now on: the daemon refreshes the template's warm pool,
// whose sandboxes are of the image before.
func (b *Builder) OnServe(fn func(v1.Hash)) {
	b.mu.Lock()
	b.onServe = fn
	b.mu.Unlock()
}

// Previous is the live stage of a staged template served by an image the
// store had under the template's name that no stage of the current recipe
// made (an older recipe's, or an operator's).
const Previous = "previous"

// NewBuilder returns a builder of cfg's image for the template name over
// store, built on first use (Start, Missing): the desktop and
// code-interpreter templates. A cached image of the current recipe is
// tagged name at once; an image named name that this recipe did not make
// (an operator's) is left alone; one an older recipe made keeps serving
// while the current one builds in the background. What the store has now
// is the template's image from now on (Image), until a build of this
// builder replaces it: names read later are not followed.
func NewBuilder(ctx context.Context, store *image.Store, name string, cfg Config, log *slog.Logger) *Builder {
	b := newBuilder(ctx, store, name, []Stage{{Config: cfg}}, log)
	key := b.stages[0].Config.Key()
	if img, err := store.Get(ctx, CachePrefix+key); err == nil {
		b.serve(img.Digest, 0)
		return b
	}
	img, err := store.Get(ctx, name)
	if err == nil {
		b.image, b.ready, b.live = img.Digest, true, Previous
		if img.Config != nil {
			if k := img.Config.Config.Labels["org.sandlot.debian.key"]; k != "" && k != key {
				b.Start() // an older recipe's: replace it once the new one is built
			}
		}
	}
	return b
}

// NewStaged returns a builder of the template name whose image is built
// in stages, each replacing the one before when it is ready, and starts
// building what the store lacks: the daemon's default template (a core
// that runs the kernels, then the full image). The builder owns name:
// whatever the store has under it serves only until a stage is built.
// What serves at once: the last stage when cached; else the image named
// name (an older recipe's, or a stage an interrupted daemon built); else
// the latest cached stage. Stages before the one that serves are not
// built again, and an image of unknown stage is followed by the last
// stage only.
func NewStaged(ctx context.Context, store *image.Store, name string, stages []Stage, log *slog.Logger) *Builder {
	b := newBuilder(ctx, store, name, stages, log)
	last := len(stages) - 1
	cached := -1
	var cachedImg image.Image
	for i := last; i >= 0; i-- {
		if img, err := store.Get(ctx, CachePrefix+stages[i].Config.Key()); err == nil {
			cached, cachedImg = i, img
			break
		}
	}
	switch named, err := store.Get(ctx, name); {
	case cached == last:
		b.serve(cachedImg.Digest, last)
		return b
	case err == nil:
		b.image, b.ready, b.live = named.Digest, true, Previous
		b.next = last
		for i, st := range stages {
			if named.Config != nil && named.Config.Config.Labels["org.sandlot.debian.key"] == st.Config.Key() {
				b.live, b.next = st.Name, i+1
			}
		}
	case cached >= 0:
		b.serve(cachedImg.Digest, cached)
	}
	b.Start()
	return b
}

func newBuilder(ctx context.Context, store *image.Store, name string, stages []Stage, log *slog.Logger) *Builder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Builder{store: store, name: name, log: log, ctx: ctx}
	for _, st := range stages {
		st.Config.Logger = log
		b.stages = append(b.stages, st)
	}
	return b
}

// serve makes stage i's image, d, the template's from now on, and names
// it name in the store.
func (b *Builder) serve(d v1.Hash, i int) {
	if err := b.store.Tag(b.ctx, b.name, d); err != nil {
		b.log.Warn(b.name+" template: tag", slog.String(logkey.Err, err.Error()))
	}
	b.mu.Lock()
	b.image, b.ready, b.live, b.next = d, true, b.stages[i].Name, i+1
	b.mu.Unlock()
}

// Image returns the digest of the template's image: what the store had
// when the builder was made, or what it built since; false while there
// is none. The built-in template resolves by it (templates.Config.Builtins),
// never by the store's name, which anything that writes the store reaches.
func (b *Builder) Image() (v1.Hash, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.image, b.ready
}

// Start begins building the stages not built yet, in the background,
// unless a build runs or every stage is built; a failure is kept for
// retryAfter.
func (b *Builder) Start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.building || b.next >= len(b.stages) || (b.err != nil && time.Since(b.failedAt) < retryAfter) {
		return
	}
	b.building, b.err = true, nil
	b.progress = Progress{Phase: "starting"}
	go b.run()
}

func (b *Builder) run() {
	start := time.Now()
	for {
		b.mu.Lock()
		i := b.next
		b.mu.Unlock()
		if i >= len(b.stages) {
			break
		}
		img, err := b.buildStage(i)
		if err != nil {
			b.mu.Lock()
			b.building, b.err, b.failedAt = false, err, time.Now()
			ready, live := b.ready, b.live
			b.mu.Unlock()
			if ready {
				b.log.Error(b.name+" template: a stage failed to build; the "+live+" stage keeps serving",
					slog.String("stage", b.stages[i].Name), slog.String(logkey.Err, err.Error()))
			} else {
				b.log.Error(b.name+" template unavailable", slog.String(logkey.Err, err.Error()))
			}
			return
		}
		b.serve(img.Digest, i)
		b.mu.Lock()
		onServe := b.onServe
		b.mu.Unlock()
		if onServe != nil {
			onServe(img.Digest)
		}
		// The earlier stages' images are not needed once this one serves
		// (a restart finds this one): without their cache names, GC takes
		// them when no sandbox uses them any more.
		for _, st := range b.stages[:i] {
			if err := b.store.Untag(b.ctx, CachePrefix+st.Config.Key()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				b.log.Warn(b.name+" template: untag an earlier stage", slog.String("stage", st.Name), slog.String(logkey.Err, err.Error()))
			}
		}
		attrs := []any{slog.String("image", img.Digest.String()), slog.Duration(logkey.Elapsed, time.Since(start).Round(time.Millisecond))}
		if st := b.stages[i].Name; st != "" {
			attrs = append(attrs, slog.String("stage", st))
		}
		if i+1 < len(b.stages) {
			attrs = append(attrs, slog.String("next_stage", b.stages[i+1].Name))
		}
		b.log.Info(b.name+" template ready", attrs...)
	}
	b.mu.Lock()
	b.building = false
	b.mu.Unlock()
}

// buildStage builds stage i, logging its progress at every step and at
// least every logEvery within one.
func (b *Builder) buildStage(i int) (image.Image, error) {
	st := b.stages[i]
	what := "building the " + b.name + " template"
	attrs := []any{}
	if st.Name != "" {
		attrs = append(attrs, slog.String("stage", st.Name), slog.String("stages", fmt.Sprintf("%d/%d", i+1, len(b.stages))))
	}
	b.log.Info(what+" (once per image store; minutes)", attrs...)
	b.mu.Lock()
	b.progress, b.reported = Progress{Phase: "starting"}, time.Time{}
	b.mu.Unlock()
	var lastLog time.Time
	logged := 0
	logNow := func(p Progress) {
		a := append(attrs[:len(attrs):len(attrs)], slog.Int("step", p.Step), slog.Int("steps", p.Steps), slog.String("phase", p.Phase),
			slog.Duration(logkey.Elapsed, p.Elapsed.Round(time.Second)))
		if p.Total > 0 {
			a = append(a, slog.Int("done", p.Done), slog.Int("total", p.Total), slog.String("package", p.Package))
		}
		if p.ETA > 0 {
			a = append(a, slog.Duration("eta", p.ETA))
		}
		b.log.Info(what, a...)
		lastLog, logged = time.Now(), p.Step
	}
	stop := make(chan struct{})
	defer close(stop)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			b.mu.Lock()
			if p := b.current(); p.Step > 0 && time.Since(lastLog) >= logEvery {
				logNow(p)
			}
			b.mu.Unlock()
		}
	}()
	return Ensure(b.ctx, b.store, st.Config, "", func(p Progress) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.next, b.progress, b.reported = i, p, time.Now()
		if p.Step != logged {
			logNow(p)
		}
	})
}

// current is the build's progress now: its last report, aged by the
// time since (a step can be silent for a minute). Under mu.
func (b *Builder) current() Progress {
	p := b.progress
	if b.reported.IsZero() {
		return p
	}
	since := time.Since(b.reported)
	p.Elapsed += since
	p.StepElapsed += since
	if p.ETA > 0 {
		p.ETA = max(p.ETA-since, time.Second).Round(time.Second)
	}
	return p
}

// Missing is the provider's answer for a template the store lacks
// (local.Config.Missing): for the builder's template it starts the build
// and says how far it is (unavailable, to be retried after RetryAfter)
// or why it failed; other names: nil.
func (b *Builder) Missing(template string) error {
	if template != b.name {
		return nil
	}
	if _, ok := b.Image(); ok {
		return nil // built meanwhile: the caller's next try finds it
	}
	b.Start()
	s := b.Status()
	if s.Err != nil {
		return fmt.Errorf("the %s template could not be built (%v): %w", b.name, s.Err, errdefs.ErrFailedPrecondition)
	}
	return errdefs.Retry(errdefs.Public(fmt.Errorf("the %s template is being built from Debian's mirror (%s; once per image store): try again in %s: %w",
		b.name, s.Describe(), RetryAfter, errdefs.ErrUnavailable),
		fmt.Sprintf("The sandbox is still being prepared: the %s template is being built (%s; on its first use only); retry in %s.", b.name, s.Describe(), RetryAfter)), RetryAfter)
}

// Status is a builder's state: what serves, and the build under way.
type Status struct {
	Template string
	// Ready: the template has an image, Image, of stage Live (a
	// Stage.Name, "" for a template of one stage, or Previous).
	Ready bool
	Image v1.Hash
	Live  string
	// Building: a build runs, of stage Stage (its Name), the StageIndex-th
	// (from 1) of Stages, at Progress.
	Building   bool
	Stage      string
	StageIndex int
	Stages     int
	Progress   Progress
	// Err is the last build's failure (kept for a minute before a use
	// starts another); a template that has an image still serves it.
	Err error
}

// Status reports the builder's state.
func (b *Builder) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Status{Template: b.name, Ready: b.ready, Image: b.image, Live: b.live, Building: b.building,
		Stages: len(b.stages), Progress: b.current(), Err: b.err}
	if b.building && b.next < len(b.stages) {
		s.Stage, s.StageIndex = b.stages[b.next].Name, b.next+1
	}
	return s
}

// Describe is the build's state in a few words: "stage core 1/2, step
// 5/10 installing packages, 12/40 packages set up, about 30 s left in
// this step".
func (s Status) Describe() string {
	p := s.Progress
	out := ""
	if s.Stage != "" {
		out = fmt.Sprintf("stage %s %d/%d, ", s.Stage, s.StageIndex, s.Stages)
	}
	if p.Step == 0 {
		return out + "starting"
	}
	out += fmt.Sprintf("step %d/%d %s", p.Step, p.Steps, p.Phase)
	if p.Total > 0 {
		out += fmt.Sprintf(", %d/%d packages set up", p.Done, p.Total)
	}
	if p.ETA > 0 {
		out += fmt.Sprintf(", about %s left in this step", p.ETA.Round(time.Second))
	}
	return out
}
