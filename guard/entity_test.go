package guard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/tenant"
)

// letter holds one entity of each type and a pattern value.
const letter = "Dear Mary O'Brien,\nYou live at 14 Ardee Road, Rathmines, Dublin 6 and were born on 12/03/1984.\n" +
	"Your bank is Allied Irish Banks, and your sister lives in Galway. Mail mary@exemplar.ie.\n"

// TestEntityRules: without the model, the rules find what context makes
// sure (cues, keys, columns, given names, legal words, address shapes,
// dates after a birth word) and leave code, library names, months and
// verbs alone.
func TestEntityRules(t *testing.T) {
	g := newTestGuard(t, Config{})
	for _, c := range []struct {
		name, in, want string
	}{
		{"letter", letter, "Dear [REDACTED:PERSON],\nYou live at [REDACTED:ADDRESS] and were born on [REDACTED:DATE_OF_BIRTH].\n" +
			"Your bank is [REDACTED:ORGANIZATION], and your sister lives in [REDACTED:LOCATION]. Mail [REDACTED:EMAIL].\n"},
		{"fadas and particles", "Dear Seán Ó Súilleabháin and Siobhán Nic Giolla Phádraig,", "Dear [REDACTED:PERSON] and [REDACTED:PERSON],"},
		{"Mc and O'", "signed by Ciarán McCarthy and Pádraig O'Neill", "signed by [REDACTED:PERSON] and [REDACTED:PERSON]"},
		{"title", "Dr. Hegarty and Ms Cullen", "Dr. [REDACTED:PERSON] and Ms [REDACTED:PERSON]"},
		{"json key", `{"name": "Fiachra", "employer": "Glanbia", "city": "Tralee"}`,
			`{"name": "[REDACTED:PERSON]", "employer": "[REDACTED:ORGANIZATION]", "city": "[REDACTED:LOCATION]"}`},
		{"dataframe column", "      name  age\n0  Fiachra   41\n1  Tiernan   38\n",
			"      name  age\n0  [REDACTED:PERSON]   41\n1  [REDACTED:PERSON]   38\n"},
		{"csv columns", "id,customer,dob\n1,Fiachra Mulcahy,1979-11-02\n",
			"id,customer,dob\n1,[REDACTED:PERSON],[REDACTED:DATE_OF_BIRTH]\n"},
		{"eircode", "deliver to D06 F2X4 today", "deliver to [REDACTED:ADDRESS] today"},
		{"uk postcode", "London NW1 6XE", "London [REDACTED:ADDRESS]"},
		{"us address", "1600 Maple Avenue, Springfield, IL 62704", "[REDACTED:ADDRESS]"},
		{"dob words", "DOB: 3 July 1991; date of birth 1991-07-03", "DOB: [REDACTED:DATE_OF_BIRTH]; date of birth [REDACTED:DATE_OF_BIRTH]"},
		{"months and verbs", "Will you Grant access in May? Bill the client. Mark it done.", ""},
		{"a date that is not a birth", "released on 12/03/1984 in Dublin", "released on 12/03/1984 in [REDACTED:LOCATION]"},
		{"code", "from sklearn.model_selection import train_test_split\nclass DataLoader(Dataset):", ""},
		{"exception", "ValueError: Cannot Read Properties Of Undefined", ""},
		{"library names", "Using Visual Studio Code with Jupyter Notebook and Apache Spark.", ""},
		{"identifiers", "self.Mary_OBrien = getName(User.Name) // see Foo.Bar", ""},
		{"log levels", "ERROR [main] WARN INFO EUR USD HTTP GET", ""},
		{"git", "Date:   Mon Jan 15 10:12:45 2024 +0000", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := c.want
			if want == "" {
				want = c.in
			}
			got, fs := g.Redact(ModeEnforce, c.in)
			if got != want {
				t.Errorf("Redact(%q)\n got %q\nwant %q\nfindings %v", c.in, got, want, fs)
			}
		})
	}
}

// TestLongTable: a header names its column for every row below it,
// however long the table (rows beyond the 64 lines a search walks up).
func TestLongTable(t *testing.T) {
	g := newTestGuard(t, Config{})
	var b strings.Builder
	b.WriteString("id,name,balance\n")
	for i := 0; i < 300; i++ {
		b.WriteString("7,Fiachra,10.50\n")
		if i%50 == 0 {
			b.WriteString("8,,0\n") // a row with no name
		}
	}
	out, _ := g.Redact(ModeEnforce, b.String())
	if n := strings.Count(out, "[REDACTED:PERSON]"); n != 300 || strings.Contains(out, "Fiachra") {
		t.Errorf("%d of 300 names redacted", n)
	}
	// a blank line ends the table: what follows has no header
	out, _ = g.Redact(ModeEnforce, "id,name\n1,Fiachra\n\nnote,Fiachra\n")
	if want := "id,name\n1,[REDACTED:PERSON]\n\nnote,Fiachra\n"; out != want {
		t.Errorf("got %q want %q", out, want)
	}
}

// TestEntityModes: off passes entities, report audits them and passes
// the text, enforce redacts; the audit carries the types, never a value.
func TestEntityModes(t *testing.T) {
	var log auditLog
	modes := map[string]string{"o": ModeOff, "r": ModeReport, "e": ModeEnforce}
	g := newTestGuard(t, Config{Audit: log.audit, ModeFor: func(_ context.Context, id string) string { return modes[id] }})
	ctx := context.Background()
	if got := g.Text(ctx, "o", letter); got != letter || len(log.events) != 0 {
		t.Errorf("off: %q, %d events", got, len(log.events))
	}
	if got := g.Text(ctx, "r", letter); got != letter {
		t.Errorf("report changed the text: %q", got)
	}
	var types []string
	for _, ev := range log.events {
		types = append(types, ev.Type)
	}
	want := []string{TypePerson, TypeAddress, TypeDateOfBirth, TypeOrganization, TypeLocation, TypeEmail}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("report audited (-want +got):\n%s", diff)
	}
	got := g.Text(ctx, "e", letter)
	for _, v := range []string{"Mary", "Ardee", "1984", "Allied", "Galway", "exemplar"} {
		if strings.Contains(got, v) {
			t.Errorf("enforce left %q: %q", v, got)
		}
	}
}

// TestEntityTypesPerTenant: a tenant's choice of entity types applies to
// its text, streams and files; a tenant with none gets the patterns
// alone. An unknown type in the configuration is refused.
func TestEntityTypesPerTenant(t *testing.T) {
	choice := map[string][]string{"none": {}, "addr": {TypeAddress}}
	g := newTestGuard(t, Config{EntitiesFor: func(_ context.Context, id string) []string { return choice[id] }})
	ctx := context.Background()
	redact := func(tenantID string) []string {
		outs := []string{g.Text(ctx, tenantID, letter)}
		st := g.Stream(ctx, tenantID)
		outs = append(outs, st.Write(letter)+st.Flush())
		f := g.File(ctx, tenantID)
		outs = append(outs, string(append(f.Write([]byte(letter)), f.Flush()...)))
		return outs
	}
	for _, out := range redact("none") {
		if !strings.Contains(out, "Dear Mary O'Brien") || !strings.Contains(out, "14 Ardee Road") || !strings.Contains(out, "[REDACTED:EMAIL]") {
			t.Errorf("entity types off: %q", out)
		}
	}
	for _, out := range redact("addr") {
		if !strings.Contains(out, "Dear Mary O'Brien") || !strings.Contains(out, "[REDACTED:ADDRESS]") || !strings.Contains(out, "1984") {
			t.Errorf("addresses only: %q", out)
		}
	}
	for _, out := range redact("default") {
		if strings.Contains(out, "Mary") || strings.Contains(out, "Ardee") {
			t.Errorf("default (all types): %q", out)
		}
	}
	if _, err := New(Config{Entities: []string{"PERSON", "SHOE_SIZE"}}); err == nil {
		t.Error("New accepted an unknown entity type")
	}
	none := newTestGuard(t, Config{Entities: []string{}})
	if out, _ := none.Redact(ModeEnforce, letter); !strings.Contains(out, "Mary O'Brien") || strings.Contains(out, "exemplar") {
		t.Errorf("Entities empty: %q", out)
	}
}

// TestEntityStreamSplit: an entity split across two writes is still
// found: the stream's output equals Text's at every split point.
func TestEntityStreamSplit(t *testing.T) {
	g := newTestGuard(t, Config{})
	ctx := context.Background()
	text := strings.Repeat("progress line without names\n", 3) + letter + `{"name": "Fiachra Mulcahy", "dob": "1979-11-02"}` + "\n"
	want := g.Text(ctx, "t", text)
	for i := 0; i <= len(text); i++ {
		st := g.Stream(ctx, "t")
		if got := collect(st, []string{text[:i], text[i:]}, t); got != want {
			t.Fatalf("split at %d:\n got %q\nwant %q", i, got, want)
		}
	}
}

// panicky is a model that fails on every window.
type panicky struct{}

func (panicky) Recognize(string) []Span { panic("weights corrupt") }
func (panicky) Info() ModelInfo         { return ModelInfo{Name: "panicky"} }

// TestModelFailsOpenToRules: a model that fails at run time never lets
// text through unscanned: the patterns and entity rules still redact, and
// ModelStatus says it failed. Without a model, ModelStatus says why.
func TestModelFailsOpenToRules(t *testing.T) {
	g := newTestGuard(t, Config{Model: panicky{}})
	got := g.Text(context.Background(), "t", letter+"Bill Gates met Warren Buffett.\n")
	for _, v := range []string{"Mary", "Ardee", "exemplar"} {
		if strings.Contains(got, v) {
			t.Errorf("enforce left %q: %q", v, got)
		}
	}
	if _, err := g.ModelStatus(); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Errorf("ModelStatus after panics: %v", err)
	}
	missing := errors.New("no weights")
	g = newTestGuard(t, Config{ModelError: missing})
	if _, err := g.ModelStatus(); !errors.Is(err, missing) {
		t.Errorf("ModelStatus without a model: %v", err)
	}
}

// TestMostSpecificWins: overlapping findings merge into one, whose type
// is the most specific: a pattern over an entity, an address over a
// place.
func TestMostSpecificWins(t *testing.T) {
	got := resolve([]Finding{{Type: TypeLocation, Start: 10, End: 16}, {Type: TypeAddress, Start: 0, End: 30},
		{Type: TypePerson, Start: 40, End: 50}, {Type: TypeEmail, Start: 45, End: 60}})
	want := []Finding{{Type: TypeAddress, Start: 0, End: 30}, {Type: TypeEmail, Start: 40, End: 60}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolve (-want +got):\n%s", diff)
	}
}

// TestEntityTypesOfRequestTenant: the request's tenant (tenant.With)
// carries its stored choice; an empty one turns entities off for it.
func TestEntityTypesOfRequestTenant(t *testing.T) {
	g := newTestGuard(t, Config{})
	off := tenant.With(context.Background(), &tenant.Tenant{ID: "t", GuardMode: ModeEnforce, GuardEntities: []string{}})
	if out := g.Text(off, "t", letter); !strings.Contains(out, "Mary O'Brien") || strings.Contains(out, "exemplar") {
		t.Errorf("tenant with no entity types: %q", out)
	}
	def := tenant.With(context.Background(), &tenant.Tenant{ID: "t", GuardMode: ModeEnforce})
	if out := g.Text(def, "t", letter); strings.Contains(out, "Mary") {
		t.Errorf("tenant with the default: %q", out)
	}
	if !slices.Equal(EntityTypes, tenant.GuardEntityTypes) {
		t.Errorf("guard.EntityTypes %v, tenant.GuardEntityTypes %v", EntityTypes, tenant.GuardEntityTypes)
	}
}
