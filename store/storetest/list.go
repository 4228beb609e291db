package storetest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/store"
)

func testListExpired(t *testing.T, s store.Backend) {
	ctx := context.Background()
	var want []string
	for i := 0; i < 5; i++ {
		r := newRec(ident("t", "c", fmt.Sprint("p", i)))
		r.ExpiresAt = base.Add(time.Duration(i) * time.Minute)
		mustCreate(t, s, r)
		if i <= 3 {
			want = append(want, r.ID)
		}
	}
	// An ended record never expires again.
	ended := newRec(ident("t", "c", "ended"))
	ended.ExpiresAt = base.Add(-time.Hour)
	mustCreate(t, s, ended)
	if _, err := s.Terminate(ctx, ended.ID, contexts.ReasonManual, base, ""); err != nil {
		t.Fatal(err)
	}
	cutoff := base.Add(3 * time.Minute) // inclusive
	got, err := s.ListExpired(ctx, cutoff, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, ids(got)); d != "" {
		t.Fatalf("ListExpired (-want +got), soonest first:\n%s", d)
	}
	got, err = s.ListExpired(ctx, cutoff, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want[:2], ids(got)); d != "" {
		t.Fatalf("ListExpired limit 2 (-want +got):\n%s", d)
	}
	got, err = s.ListExpired(ctx, base.Add(-time.Minute), 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("ListExpired before everything = %v, %v", ids(got), err)
	}
}

func testListActiveCount(t *testing.T, s store.Backend) {
	ctx := context.Background()
	var active []string
	add := func(id contexts.Identity, end bool) {
		r := mustCreate(t, s, newRec(id))
		if end {
			if _, err := s.Terminate(ctx, r.ID, contexts.ReasonManual, base, ""); err != nil {
				t.Fatal(err)
			}
			return
		}
		active = append(active, r.ID)
	}
	add(ident("A", "c1", "main"), false)
	add(ident("A", "c1", "b1"), false)
	add(ident("A", "c1", "b2"), true)
	add(ident("A", "c2", "main"), false)
	add(ident("B", "c1", "main"), false)
	add(ident("B", "c9", "main"), true)

	got, err := s.ListActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotIDs := ids(got)
	sort.Strings(gotIDs)
	sort.Strings(active)
	if d := cmp.Diff(active, gotIDs); d != "" {
		t.Fatalf("ListActive (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		tenant, conv string
		want         int
	}{
		{"A", "", 3}, {"A", "c1", 2}, {"A", "c2", 1}, {"A", "c3", 0}, {"B", "", 1}, {"B", "c9", 0}, {"C", "", 0},
	} {
		n, err := s.CountActive(ctx, tc.tenant, "", tc.conv)
		if err != nil || n != tc.want {
			t.Errorf("CountActive(%q, %q) = %d, %v; want %d", tc.tenant, tc.conv, n, err, tc.want)
		}
	}
}

func testList(t *testing.T, s store.Backend) {
	ctx := context.Background()
	type row struct {
		id    contexts.Identity
		meta  map[string]string
		ended bool
	}
	rows := []row{
		{ident("A", "c1", "main"), map[string]string{"env": "prod", "team": "x"}, false},
		{ident("A", "c1", "b"), map[string]string{"env": "prod"}, true},
		{ident("A", "c2", "main"), map[string]string{"env": "dev", "team": "x"}, false},
		{ident("A", "c3", "main"), nil, false},
		{ident("B", "c1", "main"), map[string]string{"env": "prod", "team": "x"}, false},
	}
	recs := make([]*contexts.Record, len(rows))
	for i, r := range rows {
		rec := newRec(r.id)
		rec.Metadata = r.meta
		recs[i] = mustCreate(t, s, rec)
		if r.ended {
			if _, err := s.Terminate(ctx, rec.ID, contexts.ReasonManual, base, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	pick := func(is ...int) []string {
		out := []string{}
		for _, i := range is {
			out = append(out, recs[i].ID)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		name string
		f    contexts.Filter
		want []string
	}{
		{"all", contexts.Filter{}, pick(0, 1, 2, 3, 4)},
		{"tenant", contexts.Filter{TenantID: "A"}, pick(0, 1, 2, 3)},
		{"conversation", contexts.Filter{TenantID: "A", ConversationID: "c1"}, pick(0, 1)},
		{"conversation any tenant", contexts.Filter{ConversationID: "c1"}, pick(0, 1, 4)},
		{"path", contexts.Filter{TenantID: "A", PathID: "b"}, pick(1)},
		{"active states", contexts.Filter{TenantID: "A", States: []contexts.State{contexts.StateCreating, contexts.StateReady}}, pick(0, 2, 3)},
		{"terminated", contexts.Filter{States: []contexts.State{contexts.StateTerminated}}, pick(1)},
		{"metadata one pair", contexts.Filter{Metadata: map[string]string{"env": "prod"}}, pick(0, 1, 4)},
		{"metadata two pairs", contexts.Filter{TenantID: "A", Metadata: map[string]string{"env": "dev", "team": "x"}}, pick(2)},
		{"metadata no match", contexts.Filter{Metadata: map[string]string{"env": "qa"}}, pick()},
		{"metadata missing key", contexts.Filter{Metadata: map[string]string{"nope": ""}}, pick()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, append([]string{}, ids(got)...)); d != "" {
				t.Fatalf("List(%+v) ids in ID order (-want +got):\n%s", tc.f, d)
			}
		})
	}

	// Paging: Limit and After walk every record exactly once, in ID order.
	all := pick(0, 1, 2, 3, 4)
	var walked []string
	after := ""
	for page := 0; page < 10; page++ {
		got, err := s.List(ctx, contexts.Filter{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 2 {
			t.Fatalf("page of %d records, limit 2", len(got))
		}
		if len(got) == 0 {
			break
		}
		walked = append(walked, ids(got)...)
		after = got[len(got)-1].ID
	}
	if d := cmp.Diff(all, walked); d != "" {
		t.Fatalf("paging (-want +got):\n%s", d)
	}

	// The default limit is 100.
	for i := 0; i < 101; i++ {
		mustCreate(t, s, newRec(ident("P", "c", fmt.Sprint("p", i))))
	}
	got, err := s.List(ctx, contexts.Filter{TenantID: "P"})
	if err != nil || len(got) != 100 {
		t.Fatalf("List with no limit returned %d records (%v), want 100", len(got), err)
	}
}
