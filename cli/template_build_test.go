package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/imagetest"
	"github.com/sandlot/sandlot/internal/testenv"
)

// TestTemplateBuildCommand: `sandlot template build -t NAME -f F DIR`
// builds a Dockerfile (RUN in a sandbox, COPY, ENV, ARG) into the store;
// the image's top layers hold what the steps made, with image owners.
// Bad invocations are invalid_argument; a failing RUN is
// failed_precondition with its output.
func TestTemplateBuildCommand(t *testing.T) {
	lrunNeedAgent(t)
	bb := testenv.RequireBinary(t, "busybox")
	body, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	s, err := image.Open(store, image.Config{})
	if err != nil {
		t.Fatal(err)
	}
	files := []imagetest.File{
		{Name: "bin/", Type: tar.TypeDir},
		{Name: "bin/busybox", Body: string(body), Mode: 0o755},
		{Name: "bin/sh", Type: tar.TypeSymlink, Link: "busybox"},
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n"},
		{Name: "etc/group", Body: "root:x:0:\nuser:x:1000:\n"},
	}
	if _, err := s.Put(context.Background(), imagetest.Image(t, imagetest.Layer(t, files...)), image.PutOptions{Name: "bb"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM bb\nARG WHO=nobody\nENV A=1\nCOPY note.txt /opt/\nRUN echo \"$WHO $A $(busybox id -u)\" > /opt/made && busybox chown 1000:1000 /opt/made\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "note.txt"), []byte("noted\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "Bad"), []byte("FROM bb\nRUN echo why-it-failed; exit 4\n"), 0o644)
	state, data := t.TempDir(), t.TempDir()
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := Run(context.Background(), append([]string{"template", "build", "--images-dir", store, "--state-dir", state, "--data-dir", data}, args...), nil, &out, &errb)
		return out.String() + errb.String(), err
	}
	out, err := run("-t", "built", "--build-arg", "WHO=me", dir)
	if err != nil {
		t.Fatalf("template build: %v\n%s", err, out)
	}
	if !strings.Contains(out, "[4/4] RUN") || !strings.Contains(out, "built built ") {
		t.Errorf("output:\n%s", out)
	}
	// The build is a public template record; the image has no name.
	st, err := (&storeFlags{dataDir: data}).open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetTemplate(context.Background(), "", "built")
	if err != nil || !rec.Public() || rec.Source != "dockerfile" || !strings.Contains(out, rec.ID+" "+rec.Image) {
		t.Fatalf("template record %+v: %v (output %s)", rec, err, out)
	}
	if _, err := s.Get(context.Background(), "built"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the built image is named in the store: %v", err)
	}
	img, err := s.Get(context.Background(), rec.Image)
	if err != nil {
		t.Fatal(err)
	}
	lowers := img.LowerDirs() // top first: RUN, then COPY
	if b, _ := os.ReadFile(filepath.Join(lowers[0], "opt/made")); string(b) != "me 1 0\n" {
		t.Errorf("RUN's file: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(lowers[0], "opt/made")); err != nil || fileUID(fi) != 1000 {
		t.Errorf("RUN's chown to 1000 is not 1000 in the layer: %v", err)
	}
	// The RUN layer holds what the step wrote and nothing of the sandbox
	// it ran in (agent, mount points, home).
	var entries []string
	filepath.Walk(lowers[0], func(p string, _ os.FileInfo, err error) error {
		if rel, _ := filepath.Rel(lowers[0], p); err == nil && rel != "." {
			entries = append(entries, rel)
		}
		return nil
	})
	if got := strings.Join(entries, " "); got != "opt opt/made" {
		t.Errorf("RUN layer entries: %s, want opt opt/made", got)
	}
	if b, _ := os.ReadFile(filepath.Join(lowers[1], "opt/note.txt")); string(b) != "noted\n" {
		t.Errorf("COPY's file: %q", b)
	}

	// The E2B form (Template.toJSON's body), with a tag: the tag resolves
	// to the build, the bare name still to the Dockerfile's.
	os.WriteFile(filepath.Join(dir, "e2b.json"), []byte(`{"fromImage":"bb","steps":[{"type":"ENV","args":["B","2"]},{"type":"RUN","args":["echo \"e2b $B $(busybox id -u)\" > /opt/e2b"]}],"force":false}`), 0o644)
	if out, err := run("-t", "built:e2b", "-f", filepath.Join(dir, "e2b.json"), dir); err != nil {
		t.Fatalf("template build of an E2B template: %v\n%s", err, out)
	}
	tagged, err := st.GetTemplate(context.Background(), "", "built:e2b")
	if err != nil || tagged.Source != "e2b template" || tagged.ID == rec.ID {
		t.Fatalf("the E2B build's record %+v: %v", tagged, err)
	}
	if again, _ := st.GetTemplate(context.Background(), "", "built"); again.ID != rec.ID {
		t.Errorf("a tagged build replaced the latest one: %+v", again)
	}
	if e2bImg, err := s.Get(context.Background(), tagged.Image); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(filepath.Join(e2bImg.LowerDirs()[0], "opt/e2b")); string(b) != "e2b 2 0\n" {
		t.Errorf("the E2B RUN's file: %q", b)
	}

	out, err = run("-t", "bad", "-f", filepath.Join(dir, "Bad"), dir)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "why-it-failed") {
		t.Errorf("failing RUN: %v\n%s", err, out)
	}
	for _, args := range [][]string{{dir}, {"-t", "x", "-f", filepath.Join(dir, "none"), dir}, {"-t", "x", dir, dir}, {"-t", "x", "--build-arg", "novalue", dir}, {"-t", "x", "--build-arg", "A=1", "-f", filepath.Join(dir, "e2b.json"), dir}, {"-t", "x:Bad", dir}} {
		if _, err := run(args...); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("template build %v: %v, want invalid_argument", args, err)
		}
	}
}

func fileUID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }
