package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/errdefs"
)

func runCLI(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

const sanitizeInput = "user alice@exemplar.ie from 10.1.2.3, phone +353 87 123 4567\nicon@2x.png stays\n"

func TestSanitizeEnforce(t *testing.T) {
	out, _, err := runCLI(t, sanitizeInput, "sanitize")
	if err != nil {
		t.Fatal(err)
	}
	want := "user [REDACTED:EMAIL] from [REDACTED:IP_ADDRESS], phone [REDACTED:PHONE]\nicon@2x.png stays\n"
	if out != want {
		t.Errorf("got %q want %q", out, want)
	}
}

func TestSanitizeReport(t *testing.T) {
	out, errOut, err := runCLI(t, sanitizeInput, "sanitize", "--mode", "report")
	if err != nil {
		t.Fatal(err)
	}
	if out != sanitizeInput {
		t.Errorf("report changed the text: %q", out)
	}
	if !strings.Contains(errOut, "3 findings: EMAIL=1 IP_ADDRESS=1 PHONE=1") {
		t.Errorf("summary %q", errOut)
	}
}

func TestSanitizeJSON(t *testing.T) {
	out, _, err := runCLI(t, sanitizeInput, "sanitize", "--json", "--regions", "IE,US,GB")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "alice") || strings.Contains(out, "10.1.2.3") {
		t.Errorf("JSON holds values: %s", out)
	}
	var got []struct {
		Type       string
		Start, End int
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	type span = struct {
		Type       string
		Start, End int
	}
	want := []span{{"EMAIL", 5, 22}, {"IP_ADDRESS", 28, 36}, {"PHONE", 44, 60}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	for _, f := range got {
		if sanitizeInput[f.Start:f.End] == "" {
			t.Errorf("empty span %v", f)
		}
	}
	out, _, err = runCLI(t, "nothing here", "sanitize", "--json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("no findings: %q %v", out, err)
	}
}

func TestSanitizeBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"sanitize", "--mode", "loud"},
		{"sanitize", "--regions", "XX"},
		{"sanitize", "--nope"},
		{"sanitize", "extra"},
	} {
		if _, _, err := runCLI(t, "x", args...); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%v: err %v, want invalid argument", args, err)
		}
	}
}

// TestSanitizeEntities: sanitize runs the entity detection serve runs,
// with the model, and without it when asked.
func TestSanitizeEntities(t *testing.T) {
	in := "Dear Mary O'Brien, 14 Ardee Road, Rathmines, Dublin 6.\nBill Gates met Warren Buffett in Omaha.\n"
	out, _, err := runCLI(t, in, "sanitize")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"Mary", "Ardee", "Warren Buffett"} {
		if strings.Contains(out, v) {
			t.Errorf("sanitize left %q: %q", v, out)
		}
	}
	out, _, err = runCLI(t, in, "sanitize", "--entity-model=false")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "Mary") || strings.Contains(out, "Ardee") || !strings.Contains(out, "Warren Buffett") {
		t.Errorf("rules alone: %q", out)
	}
}

// TestGuardEntitiesFlag: --guard-entities reads all, none or a list, and
// refuses an unknown type.
func TestGuardEntitiesFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{"all", nil, false},
		{"", nil, false},
		{"none", []string{}, false},
		{"person, address", []string{"PERSON", "ADDRESS"}, false},
		{"PERSON,SHOE_SIZE", nil, true},
	} {
		got, err := entityTypes(c.in)
		if (err != nil) != c.bad || !c.bad && (got == nil) != (c.want == nil) || !slices.Equal(got, c.want) {
			t.Errorf("entityTypes(%q) = %#v, %v; want %#v (error %v)", c.in, got, err, c.want, c.bad)
		}
	}
}
