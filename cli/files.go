package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
)

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("files", "copy files into and out of a sandbox, and list them (put, get, ls)",
			filesVerb("put LOCAL [REMOTE]", nil, "copy a local file into the sandbox (- for stdin, then name REMOTE)", filesPut,
				`  sandlot files put --conversation demo data.csv
  sandlot files put --conversation demo data.csv input/data.csv
  echo hello | sandlot files put --conversation demo - notes.txt`),
			filesVerb("get REMOTE [LOCAL|-]", nil, "copy a file out of the sandbox (- for stdout)",
				func(ctx context.Context, c *client.Client, t client.FileTarget, fs *flag.FlagSet, r remote, std IO) error {
					return filesGet(ctx, c, t, fs, r, std)
				},
				`  sandlot files get --conversation demo chart.png
  sandlot files get --conversation demo results.csv - | head
  sandlot files get --context 461904e7-e85f-47c5-af3a-126bba2f7052 out.txt /tmp/out.txt`),
			filesVerb("ls [DIR]", []string{"list"}, "list a directory (--depth)", filesList,
				`  sandlot files ls --conversation demo
  sandlot files ls --conversation demo --depth 3 /tmp -o json`))
		cmd.Example = `  sandlot files put --conversation demo data.csv
  sandlot exec --conversation demo 'import pandas; print(pandas.read_csv("data.csv").describe())'
  sandlot files ls --conversation demo`
		return cmd
	})
}

// filesVerb is one verb of files. It addresses a sandbox by --context ID,
// or by --conversation and --path (whose context is created when absent,
// like a tool call).
func filesVerb(use string, aliases []string, short string,
	run func(ctx context.Context, c *client.Client, t client.FileTarget, fs *flag.FlagSet, r remote, std IO) error, example string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Aliases: aliases, Short: short, Example: example}
	fs := cmd.Flags()
	var r remote
	r.register(cmd)
	var t client.FileTarget
	fs.StringVar(&t.ContextID, "context", "", "context id")
	fs.StringVar(&t.ConversationID, "conversation", "", "conversation id (instead of --context)")
	fs.StringVar(&t.UserID, "user", "", "with --conversation: the end user whose conversation it is")
	fs.StringVar(&t.PathID, "path", "", "path id (default main)")
	if cmd.Name() == "ls" {
		fs.Int("depth", 1, "levels to list, 1 to 10")
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if t.ContextID == "" && t.ConversationID == "" {
			return usageErr("files: give --context or --conversation")
		}
		c, err := r.client()
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, t, fs, r, ioOf(cmd))
	}
	return cmd
}

func filesList(ctx context.Context, c *client.Client, t client.FileTarget, fs *flag.FlagSet, r remote, std IO) error {
	depth, err := fs.GetInt("depth")
	if err != nil {
		return err
	}
	dir := ""
	if fs.NArg() > 1 {
		return usageErr("files ls: at most one directory")
	}
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	l, err := c.ListFiles(ctx, t, dir, depth)
	if err != nil {
		return err
	}
	if r.out.structured() {
		return r.out.print(std.Out, l)
	}
	rows := make([][]string, 0, len(l.Entries))
	for _, e := range l.Entries {
		rows = append(rows, []string{fmt.Sprintf("%04o", e.Mode), e.Type, humanBytes(e.Size), time.UnixMilli(e.ModTime).Format("2006-01-02 15:04"), e.Path})
	}
	return table(std.Out, []string{"MODE", "TYPE", "SIZE", "MODIFIED", "PATH"}, rows)
}

func filesPut(ctx context.Context, c *client.Client, t client.FileTarget, fs *flag.FlagSet, r remote, std IO) error {
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usageErr("files put: LOCAL [REMOTE]")
	}
	local := fs.Arg(0)
	remotePath := path.Base(local)
	if fs.NArg() == 2 {
		remotePath = fs.Arg(1)
	}
	var in io.Reader
	var total int64 = -1
	if local == "-" {
		if fs.NArg() != 2 {
			return usageErr("files put -: name the REMOTE path")
		}
		in = std.In
	} else {
		f, err := os.Open(local)
		if err != nil {
			return fmt.Errorf("files put: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			total = st.Size()
		}
		in = f
	}
	cr := &countingReader{r: in}
	sp := startSpinner(std, "uploading", func() string { return progress(cr.count(), total) })
	fi, err := c.Upload(ctx, t, remotePath, cr)
	sp.stop()
	if err != nil {
		return err
	}
	if r.out.structured() {
		return r.out.print(std.Out, fi)
	}
	fmt.Fprintf(std.Out, "%s  %s\n", fi.Path, humanBytes(fi.Size))
	return nil
}

func filesGet(ctx context.Context, c *client.Client, t client.FileTarget, fs *flag.FlagSet, r remote, std IO) error {
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usageErr("files get: REMOTE [LOCAL|-]")
	}
	remotePath := fs.Arg(0)
	local := path.Base(remotePath)
	if fs.NArg() == 2 {
		local = fs.Arg(1)
	}
	if local == "-" && r.out.structured() {
		return usageErr("files get -: the file is the output; -o json and yaml describe a file written to disk")
	}
	var out io.Writer = std.Out
	var tmp *os.File
	if local != "-" {
		// Write beside the target and rename, so a failed download
		// never leaves a truncated file under the real name.
		f, err := os.CreateTemp(dirOf(local), ".sandlot-get-*")
		if err != nil {
			return fmt.Errorf("files get: %w", err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		tmp, out = f, f
	}
	cw := &countingWriter{w: out}
	var total atomic.Int64
	total.Store(-1)
	sp := startSpinner(std, "downloading", func() string { return progress(cw.n.Load(), total.Load()) })
	_, err := c.Download(ctx, t, remotePath, cw, func(n int64) { total.Store(n) })
	sp.stop()
	if err != nil {
		return err
	}
	if tmp != nil {
		if err := tmp.Close(); err != nil {
			return fmt.Errorf("files get: %w", err)
		}
		if err := os.Rename(tmp.Name(), local); err != nil {
			return fmt.Errorf("files get: %w", err)
		}
		if r.out.structured() {
			return r.out.print(std.Out, struct {
				Path  string `json:"path"`
				Local string `json:"local"`
				Size  int64  `json:"size"`
			}{remotePath, local, cw.n.Load()})
		}
		fmt.Fprintf(std.Err, "%s  %s\n", local, humanBytes(cw.n.Load()))
	}
	return nil
}

func dirOf(p string) string {
	d := path.Dir(p)
	if d == "" {
		return "."
	}
	return d
}

func progress(n, total int64) string {
	if total > 0 {
		return fmt.Sprintf("%s / %s (%d%%)", humanBytes(n), humanBytes(total), n*100/total)
	}
	return humanBytes(n)
}

// countingWriter counts bytes written, for progress.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
