package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/runtime/oci"
)

const templateBuildLong = `Builds an image from a Dockerfile (the subset in docs/images.md) into the
image store and names it NAME, a template sandboxes can start from. Every
RUN step runs in a sandbox of its own (user namespace, no host paths).
Steps run without network here; builds that need a package mirror go
through the daemon (E2B Template.build), whose build allowlist reaches it.
Needs root and an OCI runtime, like sandlot run.`

// buildArgs collects --build-arg K=V.
type buildArgs map[string]string

func (b buildArgs) String() string { return "" }
func (b buildArgs) Type() string   { return "NAME=VALUE" }

func (b buildArgs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--build-arg %q: want NAME=VALUE", s)
	}
	b[k] = v
	return nil
}

func newTemplateBuildCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "build -t NAME [-f Dockerfile] [--build-arg K=V]... [CONTEXT_DIR]",
		Short: "build a template from a Dockerfile into the local image store",
		Long:  templateBuildLong,
		Args:  cobra.MaximumNArgs(1),
	}
	fs := cmd.Flags()
	name := fs.StringP("tag", "t", "", "name of the built template (required)")
	file := fs.StringP("file", "f", "", "the Dockerfile (default CONTEXT_DIR/Dockerfile)")
	imagesDir := fs.String("images-dir", filepath.Join(defaultDataDir(), "images"), "image store (serve's DATA_DIR/images)")
	rt := fs.String("runtime", "auto", "OCI runtime: auto, crun, runc or runsc")
	stateDir := fs.String("state-dir", filepath.Join(oci.DefaultStateDir, "cli-build"), "state directory of the build's sandboxes")
	bargs := buildArgs{}
	fs.Var(bargs, "build-arg", "ARG value, NAME=VALUE (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return templateBuildMain(cmd.Context(), ioOf(cmd), args, *name, *file, *imagesDir, *rt, *stateDir, bargs)
	}
	return cmd
}

func templateBuildMain(ctx context.Context, io IO, args []string, name, file, imagesDir, rt, stateDir string, bargs buildArgs) error {
	contextDir := "."
	if len(args) == 1 {
		contextDir = args[0]
	}
	if name == "" {
		return fmt.Errorf("template build: -t NAME is required: %w", errdefs.ErrInvalidArgument)
	}
	if file == "" {
		file = filepath.Join(contextDir, "Dockerfile")
	}
	log := slog.New(slog.NewTextHandler(io.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := image.Open(imagesDir, image.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	p, err := local.New(local.Config{Runtime: rt, StateDir: stateDir, Images: s, Logger: log})
	if err != nil {
		return err
	}
	res, err := BuildTemplate(ctx, NewBuilder(p, s, local.BuildConfig{}, true, log), TemplateBuild{
		Name: name, Dockerfile: file, ContextDir: contextDir, BuildArgs: bargs, Output: io.Out,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "built %s %s\n", name, res.Image.Digest)
	return nil
}

// TemplateBuild is one Dockerfile build.
type TemplateBuild struct {
	Name       string            // the image's name in the store
	Dockerfile string            // path of the Dockerfile
	ContextDir string            // COPY sources
	BuildArgs  map[string]string // --build-arg
	Output     io.Writer         // progress lines and RUN output; nil discards
}

// BuildTemplate parses req's Dockerfile and builds it with b, printing a
// line per step. It is the CLI's build, apart from its flags.
func BuildTemplate(ctx context.Context, b *build.Builder, req TemplateBuild) (build.Result, error) {
	out := req.Output
	if out == nil {
		out = io.Discard
	}
	f, err := os.Open(req.Dockerfile)
	if err != nil {
		return build.Result{}, fmt.Errorf("dockerfile: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	rec, err := recipe.ParseDockerfile(io.LimitReader(f, 1<<20), req.BuildArgs)
	if err != nil {
		return build.Result{}, err
	}
	return b.Build(ctx, rec, build.Options{
		Name: req.Name, ContextDir: req.ContextDir, Output: out,
		Progress: func(s build.Step) { fmt.Fprintf(out, "[%d/%d] %s\n", s.Index, s.Of, s.Text) },
	})
}
