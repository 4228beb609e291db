package local

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/internal/testenv"
)

// busyboxStore is a private image store with a busybox image named
// "bb": a shell and the usual tools, root and user (1000).
func busyboxStore(t testing.TB) *image.Store {
	t.Helper()
	bb := testenv.RequireBinary(t, "busybox")
	body, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	s, err := image.Open(t.TempDir(), image.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	files := []imagetest.File{
		{Name: "bin/", Type: tar.TypeDir},
		{Name: "bin/busybox", Body: string(body), Mode: 0o755},
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"},
		{Name: "etc/group", Body: "root:x:0:\nuser:x:1000:\n"},
		{Name: "etc/shadow", Body: "root:image-shadow:19000:0:99999:7:::\n", Mode: 0o600},
		{Name: "home/", Type: tar.TypeDir},
		{Name: "home/user/", Type: tar.TypeDir, Mode: 0o700, UID: 1000, GID: 1000},
		{Name: "root/", Type: tar.TypeDir, Mode: 0o700},
		{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
	}
	for _, tool := range []string{"sh", "echo", "cat", "rm", "mkdir", "id", "touch", "ln", "ls", "chmod", "stat", "wget", "grep", "sleep"} {
		files = append(files, imagetest.File{Name: "bin/" + tool, Type: tar.TypeSymlink, Link: "busybox"})
	}
	if _, err := s.Put(context.Background(), imagetest.Image(t, imagetest.Layer(t, files...)), image.PutOptions{Name: "bb"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// runStep runs cmd as uid:gid through r in img's layers with a fresh
// upper dir, which it returns with the output and result.
func runStep(t *testing.T, r build.Runner, s *image.Store, img image.Image, uid uint32, cmd string) (string, string, build.RunResult, error) {
	t.Helper()
	scratch := t.TempDir()
	upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := r.Run(ctx, build.RunRequest{
		Lower: img.LowerDirs(), Upper: upper, Work: work,
		Args: []string{"/bin/sh", "-c", cmd}, Env: []string{"PATH=/bin", "STEP=yes"}, Dir: "/",
		UID: uid, GID: uid, Output: &out,
	})
	return upper, out.String(), res, err
}

// TestBuildStepWalls: a RUN step runs in a sandbox, never on the host. It
// cannot write the host's root or read the host's files (it sees the
// image's /etc/shadow), its root is root of its own user namespace only
// (what it writes is owned by the sandbox's host ids, which the result
// names), it has no network, the image's shared layers are unchanged
// by what it deletes or overwrites, and it is bounded in time.
func TestBuildStepWalls(t *testing.T) {
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) {
			s := busyboxStore(t)
			img, err := s.Get(context.Background(), "bb")
			if err != nil {
				t.Fatal(err)
			}
			p := newImageProvider(t, kind, s, false)
			r := p.BuildRunner(BuildConfig{})

			hostFile := "/sandlot-build-wall-" + filepath.Base(t.TempDir())
			secret := filepath.Join(t.TempDir(), "host-secret")
			if err := os.WriteFile(secret, []byte("host-only\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := strings.Join([]string{
				"touch " + hostFile,
				"cat /etc/shadow",
				"cat " + secret + " 2>&1",
				"cat /proc/self/uid_map",
				"echo $STEP",
				"rm /etc/passwd; echo x > /bin/busybox-new; echo y >> /etc/group",
				"wget -q -T 3 -O- http://203.0.113.80/ 2>&1 || echo no-network",
				"id -u",
			}, "; ")
			upper, out, res, err := runStep(t, r, s, img, 0, cmd)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("step: %v %+v\n%s", err, res, out)
			}
			if _, err := os.Lstat(hostFile); !errors.Is(err, os.ErrNotExist) {
				os.Remove(hostFile)
				t.Errorf("the step wrote the host's %s (%v)", hostFile, err)
			}
			for _, want := range []string{"image-shadow", "No such file", "yes\n", "no-network", "\n0\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "host-only") {
				t.Errorf("the step read the host's file:\n%s", out)
			}
			// gVisor shows its own kernel's namespace there; the host
			// owner of the step's file below is the check for every kind.
			if kind != "runsc" && strings.Contains(out, "         0          0 4294967295") {
				t.Errorf("the step's root is the host's root:\n%s", out)
			}
			// Root inside wrote host ids of the sandbox's range: nobody's
			// on the host, named by the result for layer.Diff.
			fi, err := os.Lstat(filepath.Join(upper, hostFile))
			if err != nil {
				t.Fatalf("the step's file is not in its upper dir: %v", err)
			}
			if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 || uid != res.HostIDBase {
				t.Errorf("file of the step's root: host uid %d, want the sandbox's base %d (not 0)", uid, res.HostIDBase)
			}
			// The shared layer trees are as they were.
			for _, f := range []string{"etc/passwd", "bin/busybox"} {
				if _, err := os.Lstat(filepath.Join(img.LowerDirs()[0], f)); err != nil {
					t.Errorf("the image's %s: %v", f, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(img.LowerDirs()[0], "etc/group")); strings.Contains(string(b), "y\n") {
				t.Errorf("the step wrote the image's shared /etc/group")
			}

			// A step as the image's user 1000 is not root inside either.
			_, out, res, err = runStep(t, r, s, img, 1000, "id -u; touch /etc/x 2>&1; exit 3")
			if err != nil || res.ExitCode != 3 || !strings.Contains(out, "1000\n") || !strings.Contains(out, "Permission denied") {
				t.Errorf("step as 1000: %v %+v\n%s", err, res, out)
			}

			// Bounded in time.
			short := p.BuildRunner(BuildConfig{Timeout: 3 * time.Second})
			_, _, _, err = runStep(t, short, s, img, 0, "sleep 60")
			if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
				t.Errorf("a step past its time: %v, want deadline_exceeded", err)
			}
			// Past its time while its sandbox still starts (as a loaded
			// machine makes a 3 s bound): deadline_exceeded too, not the
			// runtime's "signal: killed".
			shorter := p.BuildRunner(BuildConfig{Timeout: 5 * time.Millisecond})
			_, _, _, err = runStep(t, shorter, s, img, 0, "true")
			if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
				t.Errorf("a step past its time as its sandbox starts: %v, want deadline_exceeded", err)
			}
		})
	}
}

// TestBuildInSandbox: a Dockerfile with RUN, COPY, ENV, WORKDIR and USER
// builds through sandboxes into a named image; a sandbox of that image
// sees every step's effect with the owners the recipe asked for. A
// failing step fails the build with its exit code and the tail of its
// output.
func TestBuildInSandbox(t *testing.T) {
	s := busyboxStore(t)
	p := newImageProvider(t, "crun", s, false)
	b := build.New(build.Config{Store: s, Runner: p.BuildRunner(BuildConfig{}), Epoch: time.Unix(1700000000, 0)})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("from the context\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := recipe.ParseDockerfile(strings.NewReader(`FROM bb
ENV GREETING=hi
RUN mkdir -p /opt/app && echo "$GREETING root" > /opt/app/by-root && chmod 0644 /opt/app/by-root
COPY --chown=user hello.txt /opt/app/
USER user
WORKDIR /home/user
RUN echo "$GREETING $(id -u)" > made-by-user
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := b.Build(ctx, rec, build.Options{Name: "built", ContextDir: dir, Output: &out})
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out.String())
	}
	if res.Image.Config.Config.User != "user" {
		t.Errorf("config user %q", res.Image.Config.Config.User)
	}
	c := create(t, p, contexts.Spec{Template: "built"})
	got := sh(t, c, "cat /opt/app/by-root /opt/app/hello.txt /home/user/made-by-user; stat -c '%u:%g %n' /opt/app/by-root /opt/app/hello.txt /home/user/made-by-user; echo $GREETING")
	want := "hi root\nfrom the context\nhi 1000\n0:0 /opt/app/by-root\n1000:1000 /opt/app/hello.txt\n1000:1000 /home/user/made-by-user\nhi\n"
	if got.Stdout != want {
		t.Errorf("sandbox of the built image:\n%s\nwant\n%s(stderr %s)", got.Stdout, want, got.Stderr)
	}

	bad, err := recipe.ParseDockerfile(strings.NewReader("FROM bb\nRUN echo first-line; echo the-reason >&2; exit 7\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Build(ctx, bad, build.Options{Name: "bad"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "exit code 7") || !strings.Contains(err.Error(), "the-reason") {
		t.Errorf("failing step: %v", err)
	}
	if _, err := s.Get(ctx, "bad"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a failed build left an image: %v", err)
	}
}

// TestBuildStepNotListed: a running build step is not one of the
// provider's sandboxes (List), so the manager's sweep of sandboxes no
// context owns leaves it alone; the runtime does list it.
func TestBuildStepNotListed(t *testing.T) {
	s := busyboxStore(t)
	img, err := s.Get(context.Background(), "bb")
	if err != nil {
		t.Fatal(err)
	}
	p := newImageProvider(t, "crun", s, false)
	done := make(chan error, 1)
	go func() {
		_, out, res, err := runStep(t, p.BuildRunner(BuildConfig{}), s, img, 0, "sleep 3")
		if err == nil && res.ExitCode != 0 {
			err = errors.New(out)
		}
		done <- err
	}()
	ctx := context.Background()
	seen := false
	for deadline := time.Now().Add(30 * time.Second); !seen && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ids, err := p.Runtime().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 1 {
			seen = true
			if listed, err := p.List(ctx); err != nil || len(listed) != 0 {
				t.Errorf("provider lists the build step: %v %v", listed, err)
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("step: %v", err)
	}
	if !seen {
		t.Fatal("the step's sandbox never showed in the runtime")
	}
}
