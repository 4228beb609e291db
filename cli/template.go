package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/templates"
)

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("template", "pull, import, build, push, list and delete templates (pull, import, build, push, ls, rm)",
			templateVerb("pull", "pull NAME REF", nil, "pull an image from its registry as template NAME", cobra.ExactArgs(2),
				`  sandlot template pull py312 docker.io/library/python:3.12-slim
  sandlot template pull py312 python:3.12-slim --kernels python,bash --memory 1024`),
			templateVerb("import", "import NAME FILE.tar", nil, "import an image archive (docker save, OCI layout) as template NAME", cobra.ExactArgs(2),
				`  docker save my-image:latest -o my-image.tar
  sandlot template import my-image my-image.tar`),
			newTemplateBuildCmd(),
			newTemplatePushCmd(),
			templateVerb("ls", "ls", []string{"list"}, "list templates", cobra.NoArgs,
				`  sandlot template ls
  sandlot template ls -o wide
  sandlot template ls --public --data-dir /var/lib/sandlot`),
			templateVerb("rm", "rm NAME|ID...", []string{"delete"}, "delete templates", cobra.MinimumNArgs(1),
				`  sandlot template rm py312`))
		cmd.Long = templateUsage
		cmd.Example = `  sandlot template pull py312 python:3.12-slim
  sandlot exec --template py312 'import sys; print(sys.version)'
  sandlot template ls`
		return cmd
	})
}

const templateUsage = `usage: sandlot template pull NAME REF [flags]
       sandlot template import NAME FILE.tar [flags]
       sandlot template build -t NAME [-f Dockerfile] [--build-arg K=V]... [CONTEXT_DIR]
       sandlot template push TEMPLATE REGISTRY/REPOSITORY:TAG [flags]
       sandlot template ls [flags]
       sandlot template rm NAME|ID... [flags]`

// templateVerb is one verb of template whose flags are parsed here and
// whose work is done by a function that knows nothing of them
// (templatePull, templateImport, templateList, templateRemove).
func templateVerb(verb, use string, aliases []string, short string, args cobra.PositionalArgs, example string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Aliases: aliases, Short: short, Args: args, Example: example}
	fs := cmd.Flags()
	var r remote
	r.register(cmd)
	var st templateFlags
	if verb == "pull" || verb == "import" {
		st.register(fs)
	}
	public := fs.Bool("public", false, "a public template, for every tenant: works on the store and the image store directly (operator), not over HTTP")
	storeURL := fs.String("store", "", "with --public: store URL (default: SQLite in --data-dir)")
	imagesDir := fs.String("images-dir", "", "with --public: the image store (default DATA_DIR/images)")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		if *public {
			return templatePublic(ctx, verb, pos, st, storeFlags{dataDir: r.dataDir, url: *storeURL}, *imagesDir, std.Out, r.out)
		}
		c, err := r.client()
		if err != nil {
			return err
		}
		switch verb {
		case "pull", "import":
			settings, err := st.settings()
			if err != nil {
				return err
			}
			if verb == "pull" {
				return templatePull(ctx, c, pos[0], pos[1], settings, std.Out, r.out)
			}
			return templateImport(ctx, c, pos[0], pos[1], settings, std.Out, r.out)
		case "ls":
			return templateList(ctx, c, std.Out, r.out)
		default: // rm
			return templateRemove(ctx, c, pos, std.Out, r.out)
		}
	}
	return cmd
}

// templateFlags are a template's settings as flags.
type templateFlags struct {
	user, workdir, startCmd, kernels, prestart string
	env                                        multiFlag
	cpus                                       float64
	memoryMiB, diskMiB, pids                   int64
	idleSuspend                                time.Duration
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
func (m *multiFlag) Type() string       { return "KEY=VALUE" }

func (f *templateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.user, "user", "", "user commands run as (default: the sandbox user)")
	fs.StringVar(&f.workdir, "workdir", "", "working directory, absolute (default /home/user)")
	fs.StringVar(&f.startCmd, "start-cmd", "", "command run beside each new sandbox")
	fs.StringVar(&f.kernels, "kernels", "", "comma-separated languages run_code offers (default: all)")
	fs.StringVar(&f.prestart, "prestart", "", "comma-separated kernels started at boot")
	fs.Var(&f.env, "env", "KEY=VALUE for the sandboxes' environment (repeatable)")
	fs.Float64Var(&f.cpus, "cpus", 0, "CPU quota in cores (0: the daemon's)")
	fs.Int64Var(&f.memoryMiB, "memory", 0, "memory limit in MiB (0: the daemon's)")
	fs.Int64Var(&f.diskMiB, "disk", 0, "writable layer in MiB (0: the daemon's)")
	fs.Int64Var(&f.pids, "pids", 0, "process limit (0: the daemon's)")
	fs.DurationVar(&f.idleSuspend, "idle-suspend", 0, "suspend the template's idle contexts to disk after this long without a call, e.g. 10m (0: no setting; the smallest of serve's, the template's and the tenant's wins)")
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (f *templateFlags) settings() (api.TemplateSettings, error) {
	if f.idleSuspend < 0 || f.idleSuspend%time.Second != 0 {
		return api.TemplateSettings{}, usageErr("--idle-suspend %s: want whole seconds, 0 or more", f.idleSuspend)
	}
	st := api.TemplateSettings{User: f.user, Workdir: f.workdir, StartCmd: f.startCmd, Kernels: splitList(f.kernels), Prestart: splitList(f.prestart),
		IdleSuspendSeconds: int64(f.idleSuspend / time.Second),
		Resources:          api.TemplateResources{CPUs: f.cpus, MemoryBytes: f.memoryMiB << 20, DiskBytes: f.diskMiB << 20, PIDs: f.pids}}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return st, usageErr("--env %q: want KEY=VALUE", kv)
		}
		if st.Env == nil {
			st.Env = map[string]string{}
		}
		st.Env[k] = v
	}
	return st, nil
}

func printTemplate(w io.Writer, t *api.Template, o output) error {
	if o.structured() {
		return o.print(w, t)
	}
	_, err := fmt.Fprintf(w, "%s %s %s\n", t.ID, t.Name, t.Image)
	return err
}

func templatePull(ctx context.Context, c *client.Client, name, ref string, st api.TemplateSettings, out io.Writer, o output) error {
	t, err := c.PullTemplate(ctx, name, ref, st)
	if err != nil {
		return err
	}
	return printTemplate(out, t, o)
}

func templateImport(ctx context.Context, c *client.Client, name, path string, st api.TemplateSettings, out io.Writer, o output) error {
	f, err := os.Open(path)
	if err != nil {
		return usageErr("template import: %v", err)
	}
	defer f.Close()
	t, err := c.ImportTemplate(ctx, name, st, f)
	if err != nil {
		return err
	}
	return printTemplate(out, t, o)
}

func templateList(ctx context.Context, c *client.Client, out io.Writer, o output) error {
	l, err := c.ListTemplates(ctx)
	if err != nil {
		return err
	}
	if o.structured() {
		return o.print(out, l)
	}
	return templateTable(out, *l, o.wide())
}

func templateTable(out io.Writer, l api.TemplateList, wide bool) error {
	rows := make([][]string, 0, len(l.Templates))
	for _, t := range l.Templates {
		scope := "own"
		switch {
		case t.BuiltIn:
			scope = "built-in"
		case t.Public:
			scope = "public"
		}
		kernels := strings.Join(t.Settings.Kernels, ",")
		if kernels == "" {
			kernels = "all"
		}
		img := t.Image
		if len(img) > 19 && !wide {
			img = img[:19]
		}
		rows = append(rows, []string{t.Name, t.ID, scope, kernels, img, t.Source})
	}
	return table(out, []string{"NAME", "ID", "SCOPE", "KERNELS", "IMAGE", "SOURCE"}, rows)
}

func templateRemove(ctx context.Context, c *client.Client, refs []string, out io.Writer, o output) error {
	for _, ref := range refs {
		if err := c.DeleteTemplate(ctx, ref); err != nil {
			return fmt.Errorf("template %s: %w", ref, err)
		}
		if !o.structured() {
			fmt.Fprintln(out, ref)
		}
	}
	if o.structured() {
		return o.print(out, map[string][]string{"deleted": refs})
	}
	return nil
}

// templatePublic runs a verb on public templates, on the store and the
// image store themselves: public templates are the operator's, and the
// API only ever acts for a tenant. A running daemon sees a new one at
// once; a deleted one stops resolving by name at once, while contexts
// already on it keep running.
func templatePublic(ctx context.Context, verb string, pos []string, tf templateFlags, sf storeFlags, imagesDir string, out io.Writer, o output) error {
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if imagesDir == "" {
		imagesDir = filepath.Join(sf.dataDir, "images")
	}
	imgs, err := image.Open(imagesDir, image.Config{})
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	c := templates.New(templates.Config{Store: st, Images: imgs})
	show := func(t templates.Template, err error) error {
		if err != nil {
			return err
		}
		at := server.TemplateOut(t)
		return printTemplate(out, &at, o)
	}
	switch verb {
	case "pull", "import":
		if len(pos) != 2 {
			return usageErr("template %s --public: want NAME and %s", verb, map[string]string{"pull": "REF", "import": "FILE"}[verb])
		}
		settings, err := tf.settings()
		if err != nil {
			return err
		}
		spec := templates.Spec{Name: pos[0], Settings: server.TemplateSettingsIn(settings)}
		if verb == "pull" {
			return show(c.Pull(ctx, "", pos[1], spec, nil))
		}
		return show(c.Import(ctx, "", pos[1], spec, nil))
	case "ls", "list":
		list, err := c.List(ctx, "")
		if err != nil {
			return err
		}
		l := api.TemplateList{Templates: []api.Template{}}
		for _, t := range list {
			l.Templates = append(l.Templates, server.TemplateOut(t))
		}
		if o.structured() {
			return o.print(out, l)
		}
		return templateTable(out, l, o.wide())
	case "rm", "delete":
		for _, ref := range pos {
			if err := c.Delete(ctx, "", ref); err != nil {
				return fmt.Errorf("template %s: %w", ref, err)
			}
			if !o.structured() {
				fmt.Fprintln(out, ref)
			}
		}
		if o.structured() {
			return o.print(out, map[string][]string{"deleted": pos})
		}
		return nil
	}
	return usageErr("template: unknown subcommand %q", verb)
}
