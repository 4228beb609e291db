package stack

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// pkgIndex is a tiny npm registry (/npm/) and PyPI "simple" index
// (/simple/, files under /files/) serving one package each, made in the
// test: what npmInstall and pipInstall fetch in a template build, without
// npm's registry or PyPI.
type pkgIndex struct {
	base        string // "http://pkgs.test:8080"
	npmName     string
	tgz         []byte
	pyName, whl string // project name, wheel file name
	wheel       []byte

	mu   sync.Mutex
	seen []string // request paths
}

// newPkgIndex makes the packages: the npm package npmName 1.0.0
// (index.js exporting hello(), a bin of the same name) and the Python
// project pyName 1.0 as a pure wheel (module sandlot_demo with hello()).
func newPkgIndex(t *testing.T, base, npmName, pyName string) *pkgIndex {
	t.Helper()
	x := &pkgIndex{base: base, npmName: npmName, pyName: pyName}
	x.tgz = npmTarball(t, map[string]string{
		"package/package.json": fmt.Sprintf(`{"name":%q,"version":"1.0.0","main":"index.js","bin":{%q:"bin.js"}}`, npmName, npmName),
		"package/index.js":     "exports.hello = () => 'hello from an npm package'\n",
		"package/bin.js":       "#!/usr/bin/env node\nconsole.log(require('./index.js').hello() + ' (bin)')\n",
	})
	dist := "sandlot_demo_py-1.0.dist-info/"
	x.whl = "sandlot_demo_py-1.0-py3-none-any.whl"
	x.wheel = wheel(t, []zipFile{
		{"sandlot_demo/__init__.py", "def hello():\n    return 'hello from a wheel'\n"},
		{dist + "METADATA", "Metadata-Version: 2.1\nName: " + pyName + "\nVersion: 1.0\n"},
		{dist + "WHEEL", "Wheel-Version: 1.0\nGenerator: sandlot-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}, dist+"RECORD")
	return x
}

func (x *pkgIndex) paths() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.seen...)
}

func (x *pkgIndex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x.mu.Lock()
	x.seen = append(x.seen, r.URL.Path)
	x.mu.Unlock()
	tarball := "/npm/" + x.npmName + "/-/" + x.npmName + "-1.0.0.tgz"
	switch r.URL.Path {
	case "/npm/" + x.npmName:
		sha1sum := sha1.Sum(x.tgz)
		sha512sum := sha512.Sum512(x.tgz)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"name":      x.npmName,
			"dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": map[string]any{
				"name": x.npmName, "version": "1.0.0", "bin": map[string]string{x.npmName: "bin.js"},
				"dist": map[string]string{"tarball": x.base + tarball, "shasum": hex.EncodeToString(sha1sum[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:])},
			}},
		})
	case tarball:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(x.tgz)
	case "/simple/" + x.pyName + "/":
		sum := sha256.Sum256(x.wheel)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", x.whl, hex.EncodeToString(sum[:]), x.whl)
	case "/files/" + x.whl:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(x.wheel)
	default:
		http.NotFound(w, r)
	}
}

// npmTarball is a gzipped tar of files, as npm publishes a package.
func npmTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"package/package.json", "package/index.js", "package/bin.js"} {
		body := files[name]
		mode := int64(0o644)
		if name == "package/bin.js" {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zipFile struct{ name, body string }

// wheel is a zip of files plus the RECORD (every file's sha256 and size)
// that a wheel carries.
func wheel(t *testing.T, files []zipFile, record string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var rec bytes.Buffer
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&rec, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	fmt.Fprintf(&rec, "%s,,\n", record)
	w, err := zw.Create(record)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(rec.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
