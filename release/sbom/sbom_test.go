package sbom

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestForBinary builds a binary with dependencies (this module's
// sandlot-release, which links nfpm) and checks its document against what
// `go version -m` prints of the same file: every module the toolchain
// recorded is a package of the document with its version, the binary's
// SHA-256 is the file's, and the document is valid SPDX in the parts the
// specification requires (unique ids, relationships between known ids).
func TestForBinary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "sandlot-release")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../cmd/sandlot-release").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	created := time.Unix(1795938546, 0)
	doc, err := ForBinary(bin, "v0.1.0", created)
	if err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(goBin, "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // module path: version, as go version -m says
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "dep" {
			want[f[1]] = f[2]
		}
		if len(f) >= 3 && f[0] == "=>" { // the replacement of the dep before
			want[f[1]] = f[2]
		}
	}
	if len(want) < 5 {
		t.Fatalf("go version -m listed %d modules:\n%s", len(want), out)
	}
	got := map[string]string{}
	ids := map[string]bool{}
	for _, p := range doc.Packages {
		if ids[p.SPDXID] {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = true
		if p.Name == "" || p.DownloadLocation == "" {
			t.Errorf("package %s lacks a name or download location: %+v", p.SPDXID, p)
		}
		got[p.Name] = p.VersionInfo
	}
	for path, v := range want {
		if got[path] != v {
			t.Errorf("module %s: the document says %q, go version -m %q", path, got[path], v)
		}
	}
	if got["github.com/sandlot/sandlot/release"] != "v0.1.0" || got["stdlib"] == "" {
		t.Errorf("main module %q, stdlib %q", got["github.com/sandlot/sandlot/release"], got["stdlib"])
	}
	for _, r := range doc.Relationships {
		if !ids[r.RelatedSPDXElement] || (r.SPDXElementID != "SPDXRef-DOCUMENT" && !ids[r.SPDXElementID]) {
			t.Errorf("relationship %+v names an unknown element", r)
		}
	}
	b, _ := os.ReadFile(bin)
	sum := sha256.Sum256(b)
	if doc.Packages[0].Checksums[0].ChecksumValue != hex.EncodeToString(sum[:]) {
		t.Errorf("binary checksum %+v, file %x", doc.Packages[0].Checksums, sum)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.CreationInfo.Created != "2026-11-29T07:49:06Z" ||
		!strings.HasSuffix(doc.DocumentNamespace, hex.EncodeToString(sum[:])) {
		t.Errorf("document header %+v", doc)
	}

	// The same binary gives the same bytes.
	p1, err := Write(bin, "v0.1.0", created)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(p1)
	var back Document
	if err := json.Unmarshal(a, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(bin, "v0.1.0", created); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(p1); string(again) != string(a) {
		t.Error("two documents of one binary differ")
	}
}

func TestEscapePath(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/BurntSushi/toml": "github.com/!burnt!sushi/toml",
		"golang.org/x/sys":           "golang.org/x/sys",
	} {
		if got := escapePath(in); got != want {
			t.Errorf("escapePath(%q) = %q, want %q", in, got, want)
		}
	}
}
