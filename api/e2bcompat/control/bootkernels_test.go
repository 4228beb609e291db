package control_test

import (
	"slices"
	"testing"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
)

// TestInterpreterBootsIPython: a code interpreter sandbox starts its
// python kernel with IPython imported at boot (E2B's has its Jupyter
// kernel up when create returns); a base sandbox starts none, and with
// PlainPython neither does the interpreter.
func TestInterpreterBootsIPython(t *testing.T) {
	e := newEnv(t)
	for _, tmpl := range []string{"code-interpreter-v1", "code-interpreter", "base"} {
		e.Create(key1, `{"templateID":"`+tmpl+`"}`)
	}
	want := [][]string{{"ipython"}, {"ipython"}, nil}
	if got := prestarts(e.P); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("boot kernels of code-interpreter-v1, code-interpreter, base: %q, want %q", got, want)
	}

	plain := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{PlainPython: true}})
	plain.Create(key1, `{"templateID":"code-interpreter-v1"}`)
	if got := prestarts(plain.P); len(got) != 1 || got[0] != nil {
		t.Errorf("boot kernels with PlainPython: %q, want none", got)
	}
}

// prestarts are the kernels each sandbox p created was asked to start at
// boot, in order.
func prestarts(p *e2bcompattest.Provider) [][]string {
	var out [][]string
	for _, s := range p.Specs() {
		out = append(out, s.Prestart)
	}
	return out
}
