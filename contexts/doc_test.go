package contexts_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/contexts"
)

// TestManagerAPIDocumented: docs/architecture.md's Manager API lists every
// exported method of *Manager with its signature line, so the edges'
// contract on paper is the code's.
func TestManagerAPIDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, api, _ := strings.Cut(string(b), "## The Manager API")
	typ := reflect.TypeFor[*contexts.Manager]()
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if !strings.Contains(api, "func (m *Manager) "+name+"(") {
			t.Errorf("docs/architecture.md's Manager API lacks %s", name)
		}
	}
}
