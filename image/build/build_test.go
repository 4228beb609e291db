package build

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/internal/testenv"
)

// chrootRunner runs RUN steps for these tests only: overlayfs mounted in a
// throwaway mount and pid namespace, the command chrooted into it as the
// step's user. sandlot itself runs RUN steps inside a sandbox; this runner
// has none of a sandbox's walls and must never serve a real build.
type chrootRunner struct{}

const runScript = `set -e
CHROOT=$1 M=$2 L=$3 U=$4 W=$5 D=$6 IDS=$7
shift 7
mount -t overlay overlay -o "lowerdir=$L,upperdir=$U,workdir=$W,redirect_dir=off,metacopy=off,index=off" "$M"
exec "$CHROOT" --userspec="$IDS" --groups= "$M" /bin/sh -c 'cd "$0" && exec "$@"' "$D" "$@"
`

func (chrootRunner) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	merged, err := os.MkdirTemp("", "build-run-")
	if err != nil {
		return RunResult{}, err
	}
	defer os.RemoveAll(merged)
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		return RunResult{}, err
	}
	args := append([]string{"--mount", "--pid", "--fork", "--propagation", "private", "/bin/sh", "-c", runScript, "sh",
		chroot, merged, strings.Join(req.Lower, ":"), req.Upper, req.Work, req.Dir, fmt.Sprintf("%d:%d", req.UID, req.GID)}, req.Args...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	// The host tools run with the image's environment (the command
	// inherits it through chroot), so mount is named by the script's PATH.
	cmd.Env = append(append([]string(nil), req.Env...), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	cmd.Stdout, cmd.Stderr = req.Output, req.Output
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return RunResult{ExitCode: ee.ExitCode()}, nil
	}
	return RunResult{}, err
}

var _ Runner = chrootRunner{}

// baseImage stores a busybox image named "base": a shell and the usual
// tools, root and user (1000) and a staff group (50).
func baseImage(t *testing.T, s *image.Store) image.Image {
	t.Helper()
	bb := testenv.RequireBinary(t, "busybox")
	body, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	files := []imagetest.File{
		{Name: "bin/", Type: tar.TypeDir},
		{Name: "bin/busybox", Body: string(body), Mode: 0o755},
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"},
		{Name: "etc/group", Body: "root:x:0:\nstaff:x:50:\nuser:x:1000:\n"},
		{Name: "etc/motd", Body: "welcome\n"},
		{Name: "home/", Type: tar.TypeDir},
		{Name: "home/user/", Type: tar.TypeDir, Mode: 0o700, UID: 1000, GID: 1000},
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
	}
	for _, tool := range []string{"sh", "echo", "cat", "rm", "mkdir", "id", "touch", "ln", "mknod", "ls", "chmod"} {
		files = append(files, imagetest.File{Name: "bin/" + tool, Type: tar.TypeSymlink, Link: "busybox"})
	}
	img, err := s.Put(context.Background(), imagetest.Image(t, imagetest.Layer(t, files...)), image.PutOptions{Name: "base"})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func newBuilder(t *testing.T) (*Builder, *image.Store) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "unshare")
	s, err := image.Open(t.TempDir(), image.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	baseImage(t, s)
	return New(Config{Store: s, Runner: chrootRunner{}, Epoch: time.Unix(1700000000, 0)}), s
}

// mounted mounts img read-only and returns its root.
func mounted(t *testing.T, img image.Image) string {
	t.Helper()
	m := t.TempDir()
	lower := strings.Join(img.LowerDirs(), ":")
	if len(img.Layers) == 1 {
		lower += ":" + t.TempDir() // overlayfs wants two lowers without an upper
	}
	if err := unix.Mount("overlay", m, "overlay", unix.MS_RDONLY, "lowerdir="+lower); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(m, unix.MNT_DETACH) })
	return m
}

// describeFile is owner, mode and content (or target) of one path.
func describeFile(t *testing.T, root, rel string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return "missing"
	}
	own := fmt.Sprintf("%d:%d %04o", st.Uid, st.Gid, st.Mode&0o7777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "dir " + own
	case unix.S_IFLNK:
		l, _ := os.Readlink(p)
		return "link -> " + l
	case unix.S_IFREG:
		b, _ := os.ReadFile(p)
		return fmt.Sprintf("file %s %q", own, b)
	}
	return "other"
}

// wantFiles compares each path of want (relative to root) with what
// describeFile says of it.
func wantFiles(t *testing.T, root string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for p := range want {
		got[p] = describeFile(t, root, p)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of the built image (-want +got):\n%s", diff)
	}
}

func writeContext(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(body, "symlink:"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildDockerfile(t *testing.T) {
	b, s := newBuilder(t)
	ctx := context.Background()
	ctxDir := writeContext(t, map[string]string{
		"hello.txt": "hello", "dir/a.txt": "a", "dir/link": "symlink:/etc/passwd",
	})
	rec, err := recipe.ParseDockerfile(strings.NewReader(`FROM base
ARG GREETING=hi
ENV APP=/app
WORKDIR /app/src
COPY --chown=user:staff hello.txt dir/ ./
RUN echo "$GREETING $APP $(id -u)" > /app/out && rm /etc/motd && mkdir -p /opt/x && echo x > /opt/x/f
USER user
RUN id -u > /home/user/uid && touch /home/user/mine
CMD ["/bin/sh"]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	res, err := b.Build(ctx, rec, Options{Name: "app:v1", ContextDir: ctxDir, Progress: func(s Step) {
		steps = append(steps, fmt.Sprintf("%d/%d line %d %s", s.Index, s.Of, s.Line, s.Kind))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 8 || steps[4] != "5/8 line 6 RUN" { // ARG is not a step
		t.Errorf("progress = %q", steps)
	}
	m := mounted(t, res.Image)
	want := map[string]string{
		"app/src/hello.txt": `file 1000:50 0644 "hello"`,
		"app/src/a.txt":     `file 1000:50 0644 "a"`,
		"app/src/link":      "link -> /etc/passwd",
		"app/out":           `file 0:0 0644 "hi /app 0\n"`,
		"etc/motd":          "missing",
		"etc/passwd":        `file 0:0 0644 "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"`,
		"opt/x/f":           `file 0:0 0644 "x\n"`,
		"home/user":         "dir 1000:1000 0700",
		"home/user/uid":     `file 1000:1000 0644 "1000\n"`,
	}
	wantFiles(t, m, want)
	c := res.Image.Config.Config
	if c.WorkingDir != "/app/src" || c.User != "user" || !cmp.Equal(c.Cmd, []string{"/bin/sh"}) {
		t.Errorf("config = workdir %q user %q cmd %q", c.WorkingDir, c.User, c.Cmd)
	}
	if !cmp.Equal(c.Env, []string{"PATH=/usr/bin:/bin", "APP=/app"}) {
		t.Errorf("env = %q (ARGs must not persist)", c.Env)
	}
	if n := len(res.Image.Layers); n != 5 { // base, WORKDIR, COPY, RUN, RUN
		t.Errorf("%d layers, want 5", n)
	}
	if !res.Image.Config.Created.Time.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("created = %v", res.Image.Config.Created)
	}
	// Intermediate images are garbage; the named result keeps every layer.
	if _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	got2, err := s.Get(ctx, "app:v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range got2.Layers {
		if _, err := os.Stat(l.Dir); err != nil {
			t.Errorf("layer gone after GC: %v", err)
		}
	}
}

func TestBuildE2B(t *testing.T) {
	b, _ := newBuilder(t)
	ctxDir := writeContext(t, map[string]string{"app.py": "print(1)\n"})
	rec, err := recipe.ParseE2B([]byte(`{
  "fromTemplate": "base", "startCmd": "python3 app.py", "readyCmd": "true",
  "steps": [
    {"type": "USER", "args": ["user"]},
    {"type": "RUN", "args": ["id -u > /tmp/as-root", "root"]},
    {"type": "RUN", "args": ["id -u > /tmp/as-user"]},
    {"type": "COPY", "args": ["app.py", "/app/", "user", "0700"]},
    {"type": "ENV", "args": ["A", "1", "B", "two words"]},
    {"type": "WORKDIR", "args": ["/app"]},
    {"type": "RUN", "args": ["echo \"$B $(pwd)\" > /tmp/out"]}
  ]}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(context.Background(), rec, Options{Name: "e2b", ContextDir: ctxDir})
	if err != nil {
		t.Fatal(err)
	}
	if res.StartCmd != "python3 app.py" || res.ReadyCmd != "true" {
		t.Errorf("start %q ready %q", res.StartCmd, res.ReadyCmd)
	}
	m := mounted(t, res.Image)
	for p, want := range map[string]string{
		"tmp/as-root": `file 0:0 0644 "0\n"`,
		"tmp/as-user": `file 1000:1000 0644 "1000\n"`,
		"app/app.py":  `file 1000:1000 0700 "print(1)\n"`,
		"tmp/out":     `file 1000:1000 0644 "two words /app\n"`,
	} {
		if got := describeFile(t, m, p); got != want {
			t.Errorf("%s = %s, want %s", p, got, want)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	b, s := newBuilder(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctxDir := writeContext(t, map[string]string{"ok": "ok", "evil": "symlink:" + outside})
	tests := []struct {
		name, dockerfile string
		runner           Runner
		want             error
		msg              string
	}{
		{"run fails", "FROM base\nRUN echo boom; exit 3\n", chrootRunner{}, errdefs.ErrFailedPrecondition, "line 2: RUN echo boom; exit 3: exit code 3; output ends:\nboom"},
		{"no runner", "FROM base\nRUN true\n", nil, errdefs.ErrFailedPrecondition, "no runner"},
		{"unknown base", "FROM nope\n", chrootRunner{}, errdefs.ErrNotFound, "line 1: FROM nope"},
		{"unknown user", "FROM base\nUSER ghost\n", chrootRunner{}, errdefs.ErrInvalidArgument, `"ghost" is not in the image's /etc/passwd`},
		{"copy climbing out", "FROM base\nCOPY ../x /x\n", chrootRunner{}, errdefs.ErrInvalidArgument, "source leaves the build context"},
		{"copy through a symlink out", "FROM base\nCOPY evil/secret /x\n", chrootRunner{}, errdefs.ErrInvalidArgument, "path escapes from parent"},
		{"copy absolute host path", "FROM base\nCOPY /etc/passwd /x\n", chrootRunner{}, errdefs.ErrInvalidArgument, "etc/passwd"},
		{"copy glob matching nothing", "FROM base\nCOPY *.none /x/\n", chrootRunner{}, errdefs.ErrInvalidArgument, "no source files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := recipe.ParseDockerfile(strings.NewReader(tt.dockerfile), nil)
			if err != nil {
				t.Fatal(err)
			}
			bb := New(Config{Store: s, Runner: tt.runner})
			_, err = bb.Build(context.Background(), rec, Options{Name: "bad", ContextDir: ctxDir})
			if err == nil || !strings.Contains(err.Error(), tt.msg) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.want, tt.msg)
			}
			if _, err := s.Get(context.Background(), "bad"); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("failed build is named: %v", err)
			}
		})
	}
	_ = b
}

// TestBuildHostileRun: what a RUN step leaves in its upper directory is
// hostile. Links to host files stay links, device nodes are dropped, and
// nothing of the host comes into the layer.
func TestBuildHostileRun(t *testing.T) {
	b, _ := newBuilder(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := recipe.ParseDockerfile(strings.NewReader(fmt.Sprintf(`FROM base
RUN ln -s %s /leak && mknod /mem c 1 1 && mkdir /d && ln -s %s /d/up && chmod 4755 /bin/busybox
`, secret, filepath.Dir(secret))), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(context.Background(), rec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	top := res.Image.LowerDirs()[0]
	err = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "host secret") {
				t.Errorf("host content in the layer at %s", p)
			}
		}
		if d.Type()&fs.ModeDevice != 0 {
			var st unix.Stat_t
			_ = unix.Lstat(p, &st)
			t.Errorf("device %s (%d:%d) in the layer", p, unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeFile(t, top, "leak"); got != "link -> "+secret {
		t.Errorf("leak = %s", got)
	}
	if got := describeFile(t, top, "bin/busybox"); !strings.HasPrefix(got, "file 0:0 0755 ") {
		t.Errorf("setuid busybox = %.30s", got)
	}
}

// gcRunner runs a GC in the middle of a RUN step, when the build's
// intermediate image is stored but not named.
type gcRunner struct {
	s     *image.Store
	gcErr error
}

func (r *gcRunner) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, r.gcErr = r.s.GC(short)
	return chrootRunner{}.Run(ctx, req)
}

// TestBuildHoldsOffGC: a GC that runs while a build is under way cannot
// sweep the build's unnamed layers; it waits (here: gives up) instead.
func TestBuildHoldsOffGC(t *testing.T) {
	_, s := newBuilder(t)
	ctxDir := writeContext(t, map[string]string{"f": "from the context"})
	rec, err := recipe.ParseDockerfile(strings.NewReader("FROM base\nCOPY f /f\nRUN cat /f > /g\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &gcRunner{s: s}
	res, err := New(Config{Store: s, Runner: r}).Build(context.Background(), rec, Options{Name: "gc", ContextDir: ctxDir})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r.gcErr, errdefs.ErrUnavailable) {
		t.Errorf("GC during the build = %v, want unavailable (waiting for the build's lease)", r.gcErr)
	}
	if _, err := s.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := describeFile(t, mounted(t, res.Image), "g"); got != `file 0:0 0644 "from the context"` {
		t.Errorf("g = %s", got)
	}
}
