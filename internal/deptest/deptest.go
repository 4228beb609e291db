// Package deptest keeps a package's dependencies in check: a test names
// the package, what it must never link and how many packages it may link,
// and Check lists `go list -deps` of it (what a binary importing it links:
// the package, its non-test imports, theirs, and so on) and fails on a
// forbidden import or on more packages than the budget. The idea is
// tailscale's tstest/deptest; the code is this project's.
package deptest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// TB is the part of testing.TB Check uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Module is sandlot's module path.
const Module = "github.com/sandlot/sandlot"

// Deps is what a package links.
type Deps struct {
	// All lists every linked package, the package itself and the standard
	// library included (`go list -deps | wc -l`).
	All []string
	// Outside lists those outside the standard library: third-party
	// modules and sandlot's own packages.
	Outside []string
}

// List returns what pkg links for the host's GOOS and GOARCH, with env
// (e.g. "CGO_ENABLED=0") added to go list's environment.
func List(t TB, pkg string, env ...string) Deps {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	var d Deps
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, std, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		d.All = append(d.All, path)
		if std != "true" {
			d.Outside = append(d.Outside, path)
		}
	}
	return d
}

// AgentForbidden is what neither agent binary (cmd/sandlot-agent,
// cmd/sandlot-pod-agent) may link: the daemon's libraries. An agent runs
// in every sandbox; whatever it links is attack surface there and weight
// in every container.
func AgentForbidden() map[string]string {
	return map[string]string{
		"go.opentelemetry.io/...":                    "telemetry belongs to the daemon",
		"github.com/prometheus/...":                  "metrics belong to the daemon",
		"github.com/modelcontextprotocol/...":        "MCP belongs to the daemon",
		"connectrpc.com/...":                         "the E2B wire belongs to the daemon",
		"google.golang.org/protobuf/...":             "the agent speaks JSON-RPC",
		"github.com/jackc/...":                       "stores belong to the daemon",
		"modernc.org/...":                            "stores belong to the daemon",
		"github.com/google/nftables":                 "networks are the daemon's",
		"github.com/vishvananda/...":                 "networks are the daemon's",
		"github.com/google/go-containerregistry/...": "images are the daemon's",
		"k8s.io/...":                                 "the cluster is the daemon's to talk to",
		"github.com/evanw/esbuild/...":               "the host transpiles TypeScript (agent/typescript)",
		// net/http's init was most of a Go binary's start (esbuild's API
		// brought it in).
		"net/http/...": "the agent needs no HTTP library: its one answer (health) is written by hand",
	}
}

// Check is one package's rule.
type Check struct {
	// Package is the import path checked.
	Package string
	// Env is added to go list's environment (e.g. "CGO_ENABLED=0" for
	// a static binary).
	Env []string
	// Sandlot lists the only sandlot packages (import paths relative to
	// the module, a trailing "/..." for a subtree) the package may link
	// besides itself. Nil: any.
	Sandlot []string
	// Forbidden maps import paths (or "prefix/..." subtrees) outside
	// sandlot, the standard library's included, to why they must not be
	// linked.
	Forbidden map[string]string
	// MaxOutside bounds the linked packages outside the standard library,
	// the package itself included. Zero: no bound.
	MaxOutside int
	// MaxAll bounds every linked package, the standard library included.
	// Zero: no bound.
	MaxAll int
}

// Run lists the package's dependencies and reports every breach of the
// rule, then logs the counts.
func (c Check) Run(t TB) Deps {
	t.Helper()
	d := List(t, c.Package, c.Env...)
	var bad []string
	for _, p := range d.All {
		rel, own := strings.CutPrefix(p, Module+"/")
		switch {
		case p == c.Package:
		case own && c.Sandlot != nil && !matchAny(rel, c.Sandlot):
			bad = append(bad, p+": a sandlot package outside the allowed set "+strings.Join(c.Sandlot, ", "))
		case !own:
			for pat, why := range c.Forbidden {
				if match(p, pat) {
					bad = append(bad, p+": "+why)
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s links %s", c.Package, b)
	}
	if c.MaxOutside > 0 && len(d.Outside) > c.MaxOutside {
		t.Errorf("%s links %d packages outside the standard library, more than its budget of %d:\n%s",
			c.Package, len(d.Outside), c.MaxOutside, strings.Join(d.Outside, "\n"))
	}
	if c.MaxAll > 0 && len(d.All) > c.MaxAll {
		t.Errorf("%s links %d packages in all, more than its budget of %d", c.Package, len(d.All), c.MaxAll)
	}
	t.Logf("%s links %d packages, %d of them outside the standard library", c.Package, len(d.All), len(d.Outside))
	return d
}

func matchAny(p string, pats []string) bool {
	for _, pat := range pats {
		if match(p, pat) {
			return true
		}
	}
	return false
}

// match reports whether p is pat, or lies under pat when pat ends in "/...".
func match(p, pat string) bool {
	if prefix, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == prefix || strings.HasPrefix(p, prefix+"/")
	}
	return p == pat
}

// Package is one package of the module as `go list` sees it.
type Package struct {
	// ImportPath is the package's path relative to the module
	// ("api/server"; "" for the module's root, which has none).
	ImportPath string
	// Imports are the sandlot packages its non-test files import, as
	// paths relative to the module.
	Imports []string
}

// Packages lists the module's packages (`go list ./...` from the module's
// root: test-only packages included, the nested modules not).
func Packages(t TB) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s/...: %v\n%s", Module, err, stderr.Bytes())
	}
	var pkgs []Package
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		p := Package{ImportPath: strings.TrimPrefix(fields[0], Module+"/")}
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, Module+"/"); ok {
				p.Imports = append(p.Imports, rel)
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// Importers returns the module's packages whose non-test files import pkg
// (a path relative to the module), sorted.
func Importers(t TB, pkg string) []string {
	t.Helper()
	var out []string
	for _, p := range Packages(t) {
		for _, imp := range p.Imports {
			if imp == pkg {
				out = append(out, p.ImportPath)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
