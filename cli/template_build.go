package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
	"github.com/sandlot/sandlot/templates"
)

const templateBuildUsage = `usage: sandlot template build -t NAME [-f Dockerfile] [--build-arg K=V]... [--tenant ID] [CONTEXT_DIR]

Builds an image from a Dockerfile (the subset in docs/images.md) into the
image store and records it as the template NAME: a public one, or with
--tenant that tenant's (a template of that name it had is replaced). It
works on the store and the image store directly, as the operator. Every
RUN step runs in a sandbox of its own (user namespace, no host paths).
Steps run without network here; builds that need a package mirror go
through the daemon (E2B Template.build), whose build allowlist reaches it.
Needs root and an OCI runtime, like sandlot run.

flags:
`

// buildArgs collects --build-arg K=V.
type buildArgs map[string]string

func (b buildArgs) String() string { return "" }

func (b buildArgs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--build-arg %q: want NAME=VALUE", s)
	}
	b[k] = v
	return nil
}

func templateBuildMain(ctx context.Context, args []string, io IO) error {
	fs := newFlags("template build", io)
	fs.Usage = func() { fmt.Fprint(fs.Output(), templateBuildUsage); fs.PrintDefaults() }
	name := fs.String("t", "", "name of the built template (required)")
	file := fs.String("f", "", "the Dockerfile (default CONTEXT_DIR/Dockerfile)")
	var sf storeFlags
	sf.register(fs)
	imagesDir := fs.String("images-dir", "", "image store (default DATA_DIR/images, serve's)")
	tenantID := fs.String("tenant", "", "the tenant whose template it is (default: a public template)")
	rt := fs.String("runtime", "auto", "OCI runtime: auto, crun, runc or runsc")
	stateDir := fs.String("state-dir", filepath.Join(oci.DefaultStateDir, "cli-build"), "state directory of the build's sandboxes")
	bargs := buildArgs{}
	fs.Var(bargs, "build-arg", "ARG value, NAME=VALUE (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("template build: one context dir at most: %w", errdefs.ErrInvalidArgument)
	}
	contextDir := "."
	if fs.NArg() == 1 {
		contextDir = fs.Arg(0)
	}
	if *name == "" {
		return fmt.Errorf("template build: -t NAME is required: %w", errdefs.ErrInvalidArgument)
	}
	if *file == "" {
		*file = filepath.Join(contextDir, "Dockerfile")
	}
	if *imagesDir == "" {
		*imagesDir = filepath.Join(sf.dataDir, "images")
	}
	log := slog.New(slog.NewTextHandler(io.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := image.Open(*imagesDir, image.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	p, err := local.New(local.Config{Runtime: *rt, StateDir: *stateDir, Images: s, Logger: log})
	if err != nil {
		return err
	}
	c := templates.New(templates.Config{Store: st, Images: s, Logger: log})
	t, err := BuildTemplate(ctx, c, NewBuilder(p, s, local.BuildConfig{}, true, nil, log), TemplateBuild{
		Tenant: *tenantID, Name: *name, Dockerfile: *file, ContextDir: contextDir, BuildArgs: bargs, Output: io.Out,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "built %s %s %s\n", t.Name, t.ID, t.Image)
	return nil
}

// TemplateBuild is one Dockerfile build.
type TemplateBuild struct {
	Tenant     string            // whose template; "": a public one
	Name       string            // the template's name
	Dockerfile string            // path of the Dockerfile
	ContextDir string            // COPY sources
	BuildArgs  map[string]string // --build-arg
	Output     io.Writer         // progress lines and RUN output; nil discards
}

// BuildTemplate parses req's Dockerfile, builds it with b, printing a line
// per step, and records the image as req.Tenant's template in c. It is the
// CLI's build, apart from its flags.
func BuildTemplate(ctx context.Context, c *templates.Catalog, b *build.Builder, req TemplateBuild) (templates.Template, error) {
	out := req.Output
	if out == nil {
		out = io.Discard
	}
	f, err := os.Open(req.Dockerfile)
	if err != nil {
		return templates.Template{}, fmt.Errorf("dockerfile: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	rec, err := recipe.ParseDockerfile(io.LimitReader(f, 1<<20), req.BuildArgs)
	if err != nil {
		return templates.Template{}, err
	}
	return c.Build(ctx, req.Tenant, templates.BuildSpec{Name: req.Name, Source: "dockerfile"}, func(ctx context.Context) (build.Result, error) {
		return b.Build(ctx, rec, build.Options{
			ContextDir: req.ContextDir, Output: out,
			// FROM a template name means that template's image.
			Resolve:  func(ctx context.Context, ref string) (image.Image, error) { return c.Image(ctx, req.Tenant, ref) },
			Progress: func(s build.Step) { fmt.Fprintf(out, "[%d/%d] %s\n", s.Index, s.Of, s.Text) },
		})
	})
}
