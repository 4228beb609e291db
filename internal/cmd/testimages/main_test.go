package main

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/codeinterp"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// TestImagesCoverTests walks every test file of the repository for
// debiantest.Image calls: each image a test asks for, by name and recipe,
// must be one this command builds, or a new machine builds it in the
// middle of the tests.
func TestImagesCoverTests(t *testing.T) {
	// The expressions the call sites use, by what they evaluate to.
	names := map[string]string{
		"desktop.Template":    desktop.Template,
		"codeinterp.Template": codeinterp.Template,
		"debiantest.Name":     debiantest.Name,
	}
	configs := map[string]debian.Config{
		"desktop.ImageConfig()":            desktop.ImageConfig(),
		"codeinterp.ImageConfig()":         codeinterp.ImageConfig(),
		"daemonimage.BaseConfig()":         daemonimage.BaseConfig(),
		"debian.DefaultStages()[0].Config": debian.DefaultStages()[0].Config,
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	have := images()
	calls := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Image" || len(call.Args) != 3 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "debiantest" {
				return true
			}
			calls++
			at := fset.Position(call.Pos())
			cfgExpr, nameExpr := source(fset, call.Args[1]), source(fset, call.Args[2])
			name, ok := names[nameExpr]
			if lit, isLit := call.Args[2].(*ast.BasicLit); isLit && lit.Kind == token.STRING {
				name, _ = strconv.Unquote(lit.Value)
				ok = true
			}
			cfg, cfgOK := configs[cfgExpr]
			switch built, isBuilt := have[name]; {
			case !ok:
				t.Errorf("%s: debiantest.Image names its image %s, which this test cannot evaluate (add it to names)", at, nameExpr)
			case !cfgOK:
				t.Errorf("%s: debiantest.Image builds %s, which this test cannot evaluate (add it to configs)", at, cfgExpr)
			case !isBuilt:
				t.Errorf("%s: the tests ask for the image %q, which testimages does not build (add it to images)", at, name)
			case built.Key() != cfg.Key():
				t.Errorf("%s: the tests ask for the image %q as %s, which is not the recipe testimages builds under that name", at, name, cfgExpr)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 10 {
		t.Fatalf("found %d debiantest.Image calls under %s; the walk is broken", calls, root)
	}
}

// source is the expression as it is written.
func source(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	printer.Fprint(&b, fset, e)
	return b.String()
}
