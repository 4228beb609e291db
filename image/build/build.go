// Package build executes a recipe's step list (image/recipe) into an image
// in the image store. FROM resolves a base image; each RUN runs through a
// Runner (in sandlot: inside a sandbox) in a root of the image's layers
// plus a fresh upper directory, which becomes the step's layer (with
// whiteouts for deletions); COPY turns files of the build context into a
// layer; ENV, WORKDIR, USER, CMD and ENTRYPOINT change the image config.
package build

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/layer"
	"github.com/sandlot/sandlot/image/recipe"
)

// Config configures a Builder. Zero values are documented per field.
type Config struct {
	Store *image.Store // required
	// Runner runs RUN steps; nil: a recipe with a RUN step fails with
	// failed precondition.
	Runner Runner
	// Resolve finds the base image of a FROM step when Options.Resolve
	// is not set (the operator's builds); nil: Store.Get (a name or
	// digest already in the store). Pulling is the caller's choice
	// (image/source.Pull), with auth when the recipe carries it.
	Resolve func(ctx context.Context, ref string, auth *recipe.RegistryAuth) (image.Image, error)
	// Epoch, when not zero, is the creation time written in the config and
	// history, and clamps file times in new layers (SOURCE_DATE_EPOCH).
	// Zero: the build's start time, file times kept.
	Epoch time.Time
	// MaxCopyBytes bounds the files one COPY step copies; 0: 4 GiB.
	MaxCopyBytes int64
	// Limits bound each RUN step's layer; see layer.Limits.
	Limits layer.Limits
	// HostIDBase is passed to layer.Diff: the host id that was 0 for the
	// Runner's writes (the first id of the sandbox's user namespace range);
	// 0 when the upper directory holds image ids.
	HostIDBase uint32
	Logger     *slog.Logger // nil discards
}

// Builder builds images from recipes.
type Builder struct{ cfg Config }

// New returns a Builder.
func New(cfg Config) *Builder {
	if cfg.MaxCopyBytes <= 0 {
		cfg.MaxCopyBytes = 4 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Builder{cfg: cfg}
}

// Options configures one Build. Zero values are documented per field.
type Options struct {
	Name       string    // tag the result; "": untagged (hold a lease and Tag it)
	ContextDir string    // where COPY sources are; "": COPY fails
	Output     io.Writer // RUN output, as it comes; nil: discarded
	// Progress, when set, is called as each step starts.
	Progress func(Step)
	// Labels are added to the image config's labels (who built it, for
	// which template); nil adds none.
	Labels map[string]string
	// Resolve, when set, is the one way the FROM image is found:
	// neither Config.Resolve nor the store is asked. A tenant's build
	// sets it (templates/builds: the tenant's templates, a registry), so
	// its FROM never reaches the names and digests of the shared store,
	// which are every tenant's images. nil: Base.
	Resolve func(ctx context.Context, ref string) (image.Image, error)
	// Tenant is whose build this is, passed to the Runner with each RUN
	// step (RunRequest.Tenant): the step's network is what that tenant's
	// cap allows. "": the operator's.
	Tenant string

	dockerIgnore bool // the recipe's DockerIgnore
}

// Step reports the step a build is at.
type Step struct {
	Index, Of int // from 1
	Kind      recipe.Kind
	Line      int
	Text      string // the step, shortened, for a progress line
}

// Result is a built image and the start settings the recipe carried.
type Result struct {
	Image              image.Image
	StartCmd, ReadyCmd string
}

// state is the image as it grows.
type state struct {
	img    v1.Image       // base plus the layers added so far
	cf     *v1.ConfigFile // the config as the steps change it
	stored image.Image    // img as stored (its layer trees)
}

// Build runs rec and stores the result. A failing RUN step fails the build
// with failed precondition, its line and the tail of its output.
func (b *Builder) Build(ctx context.Context, rec *recipe.Recipe, opt Options) (Result, error) {
	if len(rec.Steps) == 0 || rec.Steps[0].Kind != recipe.From {
		return Result{}, fmt.Errorf("build: a recipe starts with FROM: %w", errdefs.ErrInvalidArgument)
	}
	s := b.cfg.Store
	lease, err := s.Lease(ctx)
	if err != nil {
		return Result{}, err
	}
	defer lease.Release()
	if opt.Output == nil {
		opt.Output = io.Discard
	}
	opt.dockerIgnore = rec.DockerIgnore
	epoch := b.cfg.Epoch
	if epoch.IsZero() {
		epoch = time.Now().UTC().Truncate(time.Second)
	}

	st, err := b.from(ctx, rec.Steps[0], opt)
	if err != nil {
		return Result{}, err
	}
	for i, step := range rec.Steps {
		if opt.Progress != nil {
			opt.Progress(Step{Index: i + 1, Of: len(rec.Steps), Kind: step.Kind, Line: step.Line, Text: describe(step)})
		}
		if i == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if err := b.step(ctx, st, step, opt, epoch); err != nil {
			return Result{}, err
		}
	}
	st.cf.Created = v1.Time{Time: epoch}
	for k, v := range opt.Labels {
		if st.cf.Config.Labels == nil {
			st.cf.Config.Labels = map[string]string{}
		}
		st.cf.Config.Labels[k] = v
	}
	final, err := mutate.ConfigFile(st.img, st.cf)
	if err != nil {
		return Result{}, err
	}
	stored, err := s.Put(ctx, final, image.PutOptions{Name: opt.Name})
	if err != nil {
		return Result{}, err
	}
	return Result{Image: stored, StartCmd: rec.StartCmd, ReadyCmd: rec.ReadyCmd}, nil
}

// Base finds a FROM image as the builder's config says: Config.Resolve,
// else a name or digest in the store. The operator's builds compose it
// with their own Options.Resolve; a tenant's never reach it.
func (b *Builder) Base(ctx context.Context, ref string, auth *recipe.RegistryAuth) (image.Image, error) {
	if b.cfg.Resolve != nil {
		return b.cfg.Resolve(ctx, ref, auth)
	}
	return b.cfg.Store.Get(ctx, ref)
}

func (b *Builder) from(ctx context.Context, step recipe.Step, opt Options) (*state, error) {
	var base image.Image
	var err error
	if opt.Resolve != nil {
		base, err = opt.Resolve(ctx, step.Image)
	} else {
		base, err = b.Base(ctx, step.Image, step.RegistryAuth)
	}
	if err != nil {
		return nil, fmt.Errorf("build: line %d: FROM %s: %w", step.Line, step.Image, err)
	}
	img, err := b.cfg.Store.V1(ctx, base.Digest)
	if err != nil {
		return nil, err
	}
	return &state{img: img, cf: base.Config.DeepCopy(), stored: base}, nil
}

func (b *Builder) step(ctx context.Context, st *state, step recipe.Step, opt Options, epoch time.Time) error {
	c := &st.cf.Config
	switch step.Kind {
	case recipe.Env:
		for _, e := range step.Env {
			c.Env = setEnv(c.Env, e.Name, e.Value)
		}
	case recipe.Workdir:
		dir := step.Path
		if !path.IsAbs(dir) {
			dir = path.Join(workdir(c), dir)
		}
		c.WorkingDir = path.Clean(dir)
		img := stack(st.stored.LowerDirs())
		if _, _, err := img.lstat(c.WorkingDir); err != nil {
			// Like Docker, WORKDIR creates the directory.
			return b.addLayer(ctx, st, step, epoch, func(w io.Writer) error { return mkdirTar(w, img, c.WorkingDir, epoch) })
		}
	case recipe.User:
		if _, _, err := stack(st.stored.LowerDirs()).resolveUser(step.User); err != nil {
			return fmt.Errorf("build: line %d: USER: %w", step.Line, err)
		}
		c.User = step.User
	case recipe.Cmd:
		c.Cmd = command(c, step)
	case recipe.Entrypoint:
		c.Entrypoint = command(c, step)
	case recipe.Copy:
		img := stack(st.stored.LowerDirs())
		return b.addLayer(ctx, st, step, epoch, func(w io.Writer) error {
			return b.writeCopy(w, step, opt, workdir(c), img)
		})
	case recipe.Run:
		return b.run(ctx, st, step, opt, epoch)
	default:
		return fmt.Errorf("build: line %d: step %s is not supported: %w", step.Line, step.Kind, errdefs.ErrInvalidArgument)
	}
	st.cf.History = append(st.cf.History, v1.History{Created: v1.Time{Time: epoch}, CreatedBy: describe(step), EmptyLayer: true})
	return nil
}

// addLayer stages the tarball write makes, appends it to the image and
// stores the result, so the next step sees it as a layer tree.
func (b *Builder) addLayer(ctx context.Context, st *state, step recipe.Step, epoch time.Time, write func(io.Writer) error) error {
	l, err := b.cfg.Store.NewLayer(ctx, write)
	if err != nil {
		return err
	}
	defer l.Close()
	hist := v1.History{Created: v1.Time{Time: epoch}, CreatedBy: describe(step)}
	img, err := mutate.Append(st.img, mutate.Addendum{Layer: l, History: hist})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	// Keep the steps' config and history; take the new layer's diff id.
	next := st.cf.DeepCopy()
	next.RootFS = cf.RootFS
	next.History = append(next.History, hist)
	img, err = mutate.ConfigFile(img, next)
	if err != nil {
		return err
	}
	stored, err := b.cfg.Store.Put(ctx, img, image.PutOptions{})
	if err != nil {
		return err
	}
	st.img, st.cf, st.stored = img, next, stored
	return nil
}

func (b *Builder) run(ctx context.Context, st *state, step recipe.Step, opt Options, epoch time.Time) error {
	if b.cfg.Runner == nil {
		return fmt.Errorf("build: line %d: RUN: no runner for this build: %w", step.Line, errdefs.ErrFailedPrecondition)
	}
	c := &st.cf.Config
	user := c.User
	if step.User != "" {
		user = step.User
	}
	lowers := st.stored.LowerDirs()
	uid, gid, err := stack(lowers).resolveUser(user)
	if err != nil {
		return fmt.Errorf("build: line %d: RUN as %q: %w", step.Line, user, err)
	}
	env := append([]string(nil), c.Env...)
	for _, a := range step.BuildArgs {
		if !hasEnv(env, a.Name) { // ENV wins over ARG
			env = append(env, a.Name+"="+a.Value)
		}
	}
	if !hasEnv(env, "PATH") {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	scratch, err := os.MkdirTemp(b.cfg.Store.Root()+"/tmp", "run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	upper, work := scratch+"/upper", scratch+"/work"
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	tail := &tailBuffer{max: 4 << 10}
	res, err := b.cfg.Runner.Run(ctx, RunRequest{
		Lower: lowers, Upper: upper, Work: work,
		Args: command(c, step), Env: env, Dir: workdir(c), User: user, UID: uid, GID: gid,
		Output: io.MultiWriter(opt.Output, tail), Tenant: opt.Tenant,
	})
	if err != nil {
		return fmt.Errorf("build: line %d: RUN: %w", step.Line, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("build: line %d: %s: exit code %d; output ends:\n%s: %w",
			step.Line, describe(step), res.ExitCode, tail.String(), errdefs.ErrFailedPrecondition)
	}
	base := b.cfg.HostIDBase
	if res.HostIDBase != 0 {
		base = res.HostIDBase
	}
	return b.addLayer(ctx, st, step, epoch, func(w io.Writer) error {
		_, err := layer.Diff(ctx, upper, w, layer.DiffOptions{HostIDBase: base, Epoch: b.cfg.Epoch, Limits: b.cfg.Limits})
		return err
	})
}

// command is a step's argv: exec form as is, shell form through the
// image's shell (SHELL, default /bin/sh -c).
func command(c *v1.Config, step recipe.Step) []string {
	if step.Args != nil {
		return append([]string(nil), step.Args...)
	}
	shell := c.Shell
	if len(shell) == 0 {
		shell = []string{"/bin/sh", "-c"}
	}
	return append(append([]string(nil), shell...), step.Command)
}

func workdir(c *v1.Config) string {
	if c.WorkingDir == "" {
		return "/"
	}
	return c.WorkingDir
}

func setEnv(env []string, name, value string) []string {
	for i, e := range env {
		if strings.HasPrefix(e, name+"=") {
			env[i] = name + "=" + value
			return env
		}
	}
	return append(env, name+"="+value)
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// describe renders a step for history and progress, shortened.
func describe(s recipe.Step) string {
	var b strings.Builder
	b.WriteString(string(s.Kind))
	b.WriteByte(' ')
	switch s.Kind {
	case recipe.From:
		b.WriteString(s.Image)
	case recipe.Run, recipe.Cmd, recipe.Entrypoint:
		if s.Args != nil {
			fmt.Fprintf(&b, "%q", s.Args)
		} else {
			b.WriteString(s.Command)
		}
	case recipe.Copy:
		b.WriteString(strings.Join(s.Src, " ") + " " + s.Dest)
	case recipe.Env:
		for i, e := range s.Env {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(e.Name + "=" + e.Value)
		}
	case recipe.Workdir:
		b.WriteString(s.Path)
	case recipe.User:
		b.WriteString(s.User)
	}
	out := b.String()
	if len(out) > 200 {
		out = out[:197] + "..."
	}
	return out
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }
