package dockerignore_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/dockerignore"
)

func TestIgnored(t *testing.T) {
	m, err := dockerignore.Parse("\ufeff# build output\n*.log\n/build\nnode_modules\n**/*.tmp\nsecret\n!secret/keep.txt\n\n  docs/*.md  \n!docs/README.md\n")
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]bool{
		".":                       false,
		"app.py":                  false,
		"app.log":                 true,
		"sub/app.log":             false, // *.log is the root's only
		"build":                   true,
		"build/out.bin":           true, // inside an ignored directory
		"src/build":               false,
		"node_modules/x/index.js": true,
		"a/b/c.tmp":               true,
		"c.tmp":                   true,
		"secret":                  true,
		"secret/key.pem":          true,
		"secret/keep.txt":         false, // taken back by !
		"docs/guide.md":           true,
		"docs/README.md":          false,
		"docs/img/x.png":          false,
		"./app.log":               true,
		"Dockerfile":              false,
		"#notacomment-but-a-file": false,
	} {
		if got := m.Ignored(rel); got != want {
			t.Errorf("Ignored(%q) = %v, want %v", rel, got, want)
		}
	}
	if !m.Reincludes() {
		t.Error("Reincludes: false with ! patterns")
	}
	if plain, _ := dockerignore.Parse("*.log\n"); plain.Reincludes() {
		t.Error("Reincludes: true without ! patterns")
	}
	var none *dockerignore.Matcher
	if none.Ignored("app.log") || none.Reincludes() {
		t.Error("the nil Matcher ignores")
	}
}

func TestLoad(t *testing.T) {
	m, err := dockerignore.Load(fstest.MapFS{"Dockerfile": {Data: []byte("FROM x")}})
	if m != nil || err != nil {
		t.Fatalf("no .dockerignore: %v, %v", m, err)
	}
	m, err = dockerignore.Load(fstest.MapFS{".dockerignore": {Data: []byte("*.log\n")}})
	if err != nil || !m.Ignored("a.log") {
		t.Fatalf("Load: %v, %v", m, err)
	}
	for name, text := range map[string]string{
		"a bad pattern": "[\n",
		"a lone !":      "!\n",
		"too big":       strings.Repeat("#", dockerignore.MaxBytes) + "\nx\n",
	} {
		_, err := dockerignore.Load(fstest.MapFS{".dockerignore": {Data: []byte(text)}})
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
}
