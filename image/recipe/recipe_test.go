package recipe

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/testenv"
)

func TestParseDockerfile(t *testing.T) {
	src := `# syntax is ignored as a comment
ARG BASE=debian
ARG TAG
FROM ${BASE}:${TAG:-bookworm} AS build
ARG VERSION=1.2
ARG UNSET
ENV APP_HOME=/srv/app \
    GREETING="hello world" PLAIN=x\ y
ENV LEGACY value with spaces
WORKDIR $APP_HOME/src
# a comment between instructions

RUN apt-get update && \
    # comment inside a continued instruction
    apt-get install -y curl
RUN ["/bin/echo", "$VERSION"]
COPY --chown=user:user --chmod=0755 ["app.py", "lib dir/", "${APP_HOME}/"]
COPY a b ./
USER user:${VERSION}
run echo 'lowercase keyword'
CMD ["python3", "app.py"]
ENTRYPOINT /entry.sh
`
	got, err := ParseDockerfile(strings.NewReader(src), map[string]string{"VERSION": "9", "TAG": "", "IGNORED": "x"})
	if err != nil {
		t.Fatal(err)
	}
	args := []EnvVar{{"VERSION", "9"}}
	want := &Recipe{Steps: []Step{
		{Kind: From, Line: 4, Image: "debian:bookworm"},
		{Kind: Env, Line: 7, Env: []EnvVar{{"APP_HOME", "/srv/app"}, {"GREETING", "hello world"}, {"PLAIN", "x y"}}},
		{Kind: Env, Line: 9, Env: []EnvVar{{"LEGACY", "value with spaces"}}},
		{Kind: Workdir, Line: 10, Path: "/srv/app/src"},
		{Kind: Run, Line: 13, Command: "apt-get update &&  apt-get install -y curl", BuildArgs: args},
		{Kind: Run, Line: 16, Args: []string{"/bin/echo", "$VERSION"}, BuildArgs: args},
		{Kind: Copy, Line: 17, Src: []string{"app.py", "lib dir/"}, Dest: "/srv/app/", User: "user:user", Mode: 0o755},
		{Kind: Copy, Line: 18, Src: []string{"a", "b"}, Dest: "./"},
		{Kind: User, Line: 19, User: "user:9"},
		{Kind: Run, Line: 20, Command: "echo 'lowercase keyword'", BuildArgs: args},
		{Kind: Cmd, Line: 21, Args: []string{"python3", "app.py"}},
		{Kind: Entrypoint, Line: 22, Command: "/entry.sh"},
	}, DockerIgnore: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recipe (-want +got):\n%s", diff)
	}
}

func TestParseDockerfileErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unsupported instruction", "FROM a\nRUN x\nEXPOSE 80\n", "line 3: instruction EXPOSE is not supported"},
		{"multi-stage", "FROM a AS b\nRUN x\nFROM c\n", "line 3: a second FROM: multi-stage builds are not supported (first FROM on line 1)"},
		{"copy from a stage", "FROM a\nCOPY --from=b /x /y\n", "line 2: COPY flag --from=b is not supported"},
		{"run mount", "FROM a\nRUN --mount=type=cache,target=/x make\n", "line 2: RUN flag --mount=type=cache,target=/x is not supported"},
		{"heredoc", "FROM a\nRUN <<EOF\necho\nEOF\n", "line 2: RUN heredocs are not supported"},
		{"add", "FROM a\nADD http://x/y /y\n", "line 2: ADD is not supported"},
		{"before from", "RUN x\nFROM a\n", "line 1: RUN before FROM"},
		{"no from", "ARG A=1\n", "Dockerfile has no FROM"},
		{"bad substitution", "FROM a\nENV X=${Y/a/b}\n", "line 2: bad substitution"},
		{"unsupported substitution", "FROM a\nENV X=${Y:?err}\n", "line 2: substitution ${Y:?err} is not supported"},
		{"unterminated quote", "FROM a\nENV X=\"abc\n", "line 2: unterminated double quote"},
		{"copy one word", "FROM a\nCOPY x\n", "line 2: COPY needs a source and a destination"},
		{"bad chmod", "FROM a\nCOPY --chmod=u+x a b\n", "line 2: COPY --chmod=u+x: want octal permission bits"},
		{"continued error line is the first", "FROM a\nRUN x\nLABEL a=b \\\n  c=d\n", "line 3: instruction LABEL is not supported"},
		{"escape directive", "# escape=`\nFROM a\n", "line 1: parser directive escape is not supported"},
		{"from platform", "FROM --platform=linux/arm64 a\n", "line 1: FROM flag --platform=linux/arm64 is not supported"},
		{"bad env name", "FROM a\nENV 1X=y\n", `line 2: ENV name "1X" is not valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDockerfile(strings.NewReader(tt.src), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("err = %v, want %q (invalid argument)", err, tt.want)
			}
		})
	}
}

func TestParseDockerfileTooLarge(t *testing.T) {
	src := "FROM a\n" + strings.Repeat("RUN x\n", maxDockerfile/6+1)
	if _, err := ParseDockerfile(strings.NewReader(src), nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("err = %v", err)
	}
}

// e2bWant is what the template in testdata/e2b-template.mjs means.
var e2bWant = &Recipe{
	StartCmd: "python3 app.py",
	ReadyCmd: `[ -n "$(ss -Htuln sport = :8000)" ]`,
	Steps: []Step{
		{Kind: From, Image: "debian:bookworm"},
		{Kind: Run, Line: 1, Command: "apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y curl jq", User: "root"},
		{Kind: Run, Line: 2, Command: "pip install requests", User: "root"},
		{Kind: Run, Line: 3, Command: "npm install -g left-pad", User: "root"},
		{Kind: Run, Line: 4, Command: "echo hi", User: "root"},
		{Kind: Run, Line: 5, Command: "mkdir -p /data && touch /data/x"},
		{Kind: Copy, Line: 6, Src: []string{"app.py"}, Dest: "/app/", User: "user", Mode: 0o755},
		{Kind: Env, Line: 7, Env: []EnvVar{{"A", "1"}, {"B", "two words"}}},
		{Kind: Workdir, Line: 8, Path: "/app"},
		{Kind: User, Line: 9, User: "user"},
	},
}

// TestParseE2BGolden reads the body the E2B JS SDK 2.51.0 produced for
// testdata/e2b-template.mjs.
func TestParseE2BGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/e2b-template.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseE2B(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e2bWant, got); diff != "" {
		t.Errorf("recipe (-want +got):\n%s", diff)
	}
}

// TestParseE2BFromSDK asks the official SDK (as e2e/e2b pins it) for the
// body now, so an SDK upgrade that changes the wire format fails here.
func TestParseE2BFromSDK(t *testing.T) {
	node := testenv.RequireBinary(t, "node")
	mod, err := filepath.Abs("../../e2e/e2b/node_modules/e2b/dist/index.mjs")
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(mod)
	testenv.Require(t, statErr == nil, "e2b npm package in e2e/e2b (scripts/deps.sh test)")
	ctxDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctxDir, "app.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, "testdata/e2b-template.mjs", mod, ctxDir).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	got, err := ParseE2B(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e2bWant, got); diff != "" {
		t.Errorf("recipe (-want +got):\n%s", diff)
	}
}

func TestParseE2BErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"no base", `{"steps":[]}`, "no fromImage or fromTemplate"},
		{"both bases", `{"fromImage":"a","fromTemplate":"b","steps":[]}`, "both fromImage and fromTemplate"},
		{"aws registry", `{"fromImage":"a","fromImageRegistry":{"type":"aws"},"steps":[]}`, `fromImageRegistry type "aws" is not supported`},
		{"unknown step", `{"fromImage":"a","steps":[{"type":"RUN","args":["x"]},{"type":"ADD","args":["a","b"]}]}`, `step 2: step type "ADD" is not supported`},
		{"run without command", `{"fromImage":"a","steps":[{"type":"RUN","args":[]}]}`, "step 1: RUN takes [command, user?]"},
		{"odd env", `{"fromImage":"a","steps":[{"type":"ENV","args":["A"]}]}`, "step 1: ENV takes name, value pairs"},
		{"bad mode", `{"fromImage":"a","steps":[{"type":"COPY","args":["a","/b","","rwx"]}]}`, `step 1: COPY mode "rwx"`},
		{"not json", `{"fromImage":`, "E2B template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseE2B([]byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	if r, err := ParseE2B([]byte(`{"fromTemplate":"my-template","fromImageRegistry":{"type":"registry","username":"u","password":"p"},"steps":[]}`)); err != nil ||
		r.Steps[0].Image != "my-template" || r.Steps[0].RegistryAuth == nil || r.Steps[0].RegistryAuth.Password != "p" {
		t.Errorf("fromTemplate with registry: %+v, %v", r, err)
	}
}
