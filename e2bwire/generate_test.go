package e2bwire

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/sandlot/sandlot/internal/testenv"
)

// TestGeneratedCurrent regenerates the Go code from the .proto files with
// protoc and the plugin versions pinned in go.mod, and compares it with
// the committed files. protoc's own version line is ignored.
func TestGeneratedCurrent(t *testing.T) {
	protoc := testenv.RequireBinary(t, "protoc") // Debian package protobuf-compiler
	// the well-known types the protos import; Debian package libprotobuf-dev
	testenv.RequireFile(t, "/usr/include/google/protobuf/timestamp.proto")
	bin := t.TempDir()
	for _, pkg := range []string{"google.golang.org/protobuf/cmd/protoc-gen-go", "connectrpc.com/connect/cmd/protoc-gen-connect-go"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	out := t.TempDir()
	protos := []string{"process/process.proto", "filesystem/filesystem.proto"}
	args := append([]string{"-I", ".",
		"--plugin=protoc-gen-go=" + filepath.Join(bin, "protoc-gen-go"),
		"--plugin=protoc-gen-connect-go=" + filepath.Join(bin, "protoc-gen-connect-go"),
		"--go_out=" + out, "--go_opt=paths=source_relative",
		"--connect-go_out=" + out, "--connect-go_opt=paths=source_relative"}, protos...)
	if b, err := exec.Command(protoc, args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	version := regexp.MustCompile(`(?m)^// \tprotoc .*$`)
	for _, f := range []string{
		"process/process.pb.go", "process/processconnect/process.connect.go",
		"filesystem/filesystem.pb.go", "filesystem/filesystemconnect/filesystem.connect.go",
	} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(version.ReplaceAll(got, nil), version.ReplaceAll(want, nil)) {
			t.Errorf("%s is stale: run go generate ./e2bwire", f)
		}
	}
}
