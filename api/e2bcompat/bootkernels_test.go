package e2bcompat_test

import (
	"net/http/httptest"
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
		e.create(key1, `{"templateID":"`+tmpl+`"}`)
	}
	want := [][]string{{"ipython"}, {"ipython"}, nil}
	if !slices.EqualFunc(e.m.Prestarts, want, slices.Equal) {
		t.Errorf("boot kernels of code-interpreter-v1, code-interpreter, base: %q, want %q", e.m.Prestarts, want)
	}

	m := e2bcompattest.NewManager()
	plain := &env{t: t, m: m}
	h := e2bcompat.New(e2bcompat.Config{Manager: m, Tenants: tenants, Secret: []byte("test-secret"), PlainPython: true})
	plain.srv = httptest.NewServer(h)
	t.Cleanup(plain.srv.Close)
	plain.create(key1, `{"templateID":"code-interpreter-v1"}`)
	if len(m.Prestarts) != 1 || m.Prestarts[0] != nil {
		t.Errorf("boot kernels with PlainPython: %q, want none", m.Prestarts)
	}
}
