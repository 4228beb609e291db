package sdk

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/image/debian/debiantest"
	"github.com/sandlot/sandlot/internal/testenv"
)

const tsDir = "../../sdk/typescript"
const pyDir = "../../sdk/python"

// npmReady makes sure the SDK's node_modules match its package-lock.json.
func npmReady(t *testing.T) {
	t.Helper()
	testenv.RequireBinary(t, "node")
	if _, err := os.Stat(filepath.Join(tsDir, "node_modules", "typescript", "package.json")); err == nil {
		return
	}
	cmd := exec.Command(testenv.RequireBinary(t, "npm"), "ci", "--no-audit", "--no-fund")
	cmd.Dir = tsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

func run(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// tsc type-checks one file of typecheck/ with the pinned compiler.
func tsc(t *testing.T, file string) (string, error) {
	return run(t, tsDir, nil, 3*time.Minute, "node", "node_modules/typescript/bin/tsc", "--noEmit", "--strict",
		"--target", "ES2022", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--skipLibCheck",
		"--lib", "ES2022,DOM,DOM.Iterable", "typecheck/"+file)
}

// TestOpenAPITypeScript: src/openapi.ts is what the pinned
// openapi-typescript makes of api/openapi.json, and a tool call's
// arguments type-check against it: right ones compile, wrong ones (an
// unknown language, an unknown field, a missing required argument) fail
// with the compiler naming them.
func TestOpenAPITypeScript(t *testing.T) {
	npmReady(t)
	out := filepath.Join(t.TempDir(), "openapi.ts")
	if o, err := run(t, tsDir, nil, 3*time.Minute, "node", "node_modules/openapi-typescript/bin/cli.js",
		"../../api/openapi.json", "-o", out, "--default-non-nullable", "false", "--empty-objects-unknown"); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, o)
	}
	want, _ := os.ReadFile(out)
	got, _ := os.ReadFile(filepath.Join(tsDir, "src", "openapi.ts"))
	if string(want) != string(got) {
		t.Errorf("sdk/typescript/src/openapi.ts is not current: run npm run generate in sdk/typescript")
	}
	if o, err := tsc(t, "good.ts"); err != nil {
		t.Errorf("typecheck/good.ts does not compile: %v\n%s", err, o)
	}
	for file, want := range map[string]string{
		"bad_language.ts": `TS2322: Type '"cobol"' is not assignable`,
		"bad_field.ts":    `TS2353: Object literal may only specify known properties, and 'lang' does not exist`,
		"bad_missing.ts":  `Property 'command' is missing`,
	} {
		t.Run(file, func(t *testing.T) {
			o, err := tsc(t, file)
			if err == nil {
				t.Fatalf("typecheck/%s compiles: a wrong argument went unnoticed", file)
			}
			if !strings.Contains(o, want) {
				t.Errorf("typecheck/%s failed otherwise than on its argument:\n%s", file, o)
			}
		})
	}
}

// TestPythonTypes: sandlot/types.py is what scripts/gen_types.py makes of
// api/openapi.json, the SDK is mypy --strict clean, and its results are
// typed: typecheck/good.py passes, a wrong language or a field run_code's
// result does not have fails naming it.
func TestPythonTypes(t *testing.T) {
	python := testenv.RequireBinary(t, "/usr/bin/python3")
	mypy := testenv.RequireBinary(t, "mypy")
	out := filepath.Join(t.TempDir(), "types.py")
	if o, err := run(t, pyDir, nil, time.Minute, python, "scripts/gen_types.py", out); err != nil {
		t.Fatalf("gen_types: %v\n%s", err, o)
	}
	want, _ := os.ReadFile(out)
	got, _ := os.ReadFile(filepath.Join(pyDir, "sandlot", "types.py"))
	if string(want) != string(got) {
		t.Errorf("sdk/python/sandlot/types.py is not current: run python3 scripts/gen_types.py in sdk/python")
	}
	env := []string{"MYPYPATH=."}
	if o, err := run(t, pyDir, env, 5*time.Minute, mypy, "--strict", "--no-incremental", "sandlot", "typecheck/good.py"); err != nil {
		t.Fatalf("mypy --strict: %v\n%s", err, o)
	}
	for file, want := range map[string]string{
		"bad_language.py": `incompatible type "Literal['cobol']"`,
		"bad_field.py":    `TypedDict "RunCodeResult" has no key "output"`,
	} {
		t.Run(file, func(t *testing.T) {
			o, err := run(t, pyDir, env, 5*time.Minute, mypy, "--strict", "--no-incremental", "typecheck/"+file)
			if err == nil {
				t.Fatalf("typecheck/%s passes mypy: a wrong use went unnoticed", file)
			}
			if !strings.Contains(o, want) {
				t.Errorf("typecheck/%s failed otherwise than on its mistake:\n%s", file, o)
			}
		})
	}
}

// serve starts `sandlot serve` (SANDLOT_BIN, as make test sets it) on a
// fresh data dir with a context limit per conversation the suites meet,
// and returns its URL and the bootstrap tenant's key.
func serve(t *testing.T) (string, string) {
	t.Helper()
	testenv.RequireRoot(t)
	debiantest.Default(t)
	data := t.TempDir()
	state, err := os.MkdirTemp("", "sl-sdk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	cmd := exec.Command(testenv.SandlotBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--state-dir", state,
		"--pool-size", "0", "--providers", "local", "--images-dir", debiantest.StoreDir(),
		"--max-contexts-per-conversation", "3", "--max-contexts-per-tenant", "40")
	cmd.Env = append(os.Environ(), "SANDLOT_ADDR=")
	srv := testenv.StartServe(t, cmd, data, 60*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandlot serve stderr:\n%s", srv.Log())
		}
		if !srv.Exited() {
			srv.Stop(t, 30*time.Second)
		}
	})
	b, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatalf("bootstrap key: %v", err)
	}
	return srv.URL, strings.TrimSpace(string(b))
}

// TestSDKs runs each SDK's suite against one real daemon.
func TestSDKs(t *testing.T) {
	npmReady(t)
	python := pythonReady(t)
	if o, err := run(t, tsDir, nil, 5*time.Minute, "node", "scripts/build.mjs"); err != nil {
		t.Fatalf("build: %v\n%s", err, o)
	}
	url, key := serve(t)
	env := []string{"SANDLOT_URL=" + url, "SANDLOT_API_KEY=" + key}
	t.Run("typescript", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(tsDir, "test", "*.test.mjs"))
		args := []string{"--test", "--test-concurrency=1", "--test-force-exit", "--test-reporter=spec"}
		for _, f := range files {
			args = append(args, strings.TrimPrefix(f, tsDir+"/"))
		}
		o, err := run(t, tsDir, env, 15*time.Minute, "node", args...)
		t.Logf("node --test:\n%s", o)
		if err != nil || !regexp.MustCompile(`(?m)^ℹ fail 0$`).MatchString(o) {
			t.Fatalf("node --test: %v", err)
		}
	})
	t.Run("python", func(t *testing.T) {
		o, err := run(t, pyDir, env, 15*time.Minute, python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
		t.Logf("pytest:\n%s", o)
		if err != nil {
			t.Fatalf("pytest: %v", err)
		}
	})
	t.Run("readme", func(t *testing.T) {
		ts := firstBlock(t, filepath.Join(tsDir, "README.md"), "ts")
		dir := filepath.Join(tsDir, "readme-example")
		os.MkdirAll(dir, 0o755)
		t.Cleanup(func() { os.RemoveAll(dir) })
		// The example imports the package by name, as a user's program
		// does, and is written without type annotations, so node runs it.
		src := strings.ReplaceAll(ts, `from "@sandlot/sdk"`, `from "../dist/esm/index.js"`)
		if err := os.WriteFile(filepath.Join(dir, "example.mjs"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if o, err := run(t, tsDir, env, 5*time.Minute, "node", "readme-example/example.mjs"); err != nil || !strings.Contains(o, "42") {
			t.Errorf("sdk/typescript/README.md's example: %v\n%s", err, o)
		}
		py := firstBlock(t, filepath.Join(pyDir, "README.md"), "python")
		if o, err := run(t, pyDir, env, 5*time.Minute, python, "-c", py); err != nil || !strings.Contains(o, "42") {
			t.Errorf("sdk/python/README.md's example: %v\n%s", err, o)
		}
	})
}

// pythonReady checks Debian's python3 has what the Python SDK and its
// tests use.
func pythonReady(t *testing.T) string {
	t.Helper()
	python := testenv.RequireBinary(t, "/usr/bin/python3")
	for _, mod := range []string{"httpx", "pytest"} {
		if o, err := run(t, pyDir, nil, time.Minute, python, "-c", "import "+mod); err != nil {
			t.Fatalf("python3 has no %s (scripts/deps.sh test installs it): %s", mod, o)
		}
	}
	return python
}

// firstBlock is the README's first fenced block of lang: the example it
// opens with.
func firstBlock(t *testing.T, path, lang string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no %s block", path, lang)
	}
	return string(m[1])
}

// TestSDKVersions: both SDKs carry the daemon's newest release
// (CHANGELOG.md's first version section) in their package metadata and in
// the constant their version check compares with, so a release that
// forgets to version the SDKs with the daemon fails here.
func TestSDKVersions(t *testing.T) {
	changelog, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`).FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md names no release")
	}
	release := string(m[1])
	for _, c := range []struct{ file, pattern string }{
		{tsDir + "/package.json", `(?m)^  "version": "([^"]+)"`},
		{tsDir + "/src/version.ts", `SDK_VERSION = "([^"]+)"`},
		{pyDir + "/pyproject.toml", `(?m)^version = "([^"]+)"`},
		{pyDir + "/sandlot/client.py", `(?m)^SDK_VERSION = "([^"]+)"`},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		got := regexp.MustCompile(c.pattern).FindSubmatch(b)
		if got == nil || string(got[1]) != release {
			t.Errorf("%s: version %q, want the daemon's release %s", c.file, got, release)
		}
	}
}
