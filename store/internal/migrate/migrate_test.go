package migrate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sandlot/sandlot/errdefs"
)

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    []int
		wantErr bool
	}{
		{"ordered by version", map[string]string{"m/0010_b.sql": "b", "m/0002_a.sql": "a", "m/README": "x"}, []int{2, 10}, false},
		{"bad name", map[string]string{"m/init.sql": ""}, nil, true},
		{"zero version", map[string]string{"m/0000_x.sql": ""}, nil, true},
		{"duplicate version", map[string]string{"m/0001_a.sql": "", "m/1_b.sql": ""}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for p, s := range tc.files {
				fsys[p] = &fstest.MapFile{Data: []byte(s)}
			}
			ms, err := Load(fsys, "m")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("versions %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("versions %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestKnown(t *testing.T) {
	ms := []Migration{{Version: 1}, {Version: 2}, {Version: 3}}
	for _, tc := range []struct {
		name    string
		applied map[int]bool
		wantErr bool
	}{
		{"fresh", map[int]bool{}, false},
		// A lower version can arrive after a higher one (branches reserve
		// numbers): the gap is applied, not an error.
		{"gap", map[int]bool{1: true, 3: true}, false},
		{"newer binary migrated it", map[int]bool{1: true, 4: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Known(ms, tc.applied); (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	ms := []Migration{{Version: 1, Name: "0001_a.sql"}, {Version: 2, Name: "0002_b.sql"}, {Version: 3, Name: "0003_c.sql"}}
	for _, tc := range []struct {
		name    string
		applied map[int]bool
		current int
		pending []int
		wantErr string
	}{
		{"fresh", map[int]bool{}, 0, []int{1, 2, 3}, ""},
		{"gap", map[int]bool{1: true, 3: true}, 3, []int{2}, ""},
		{"current", map[int]bool{1: true, 2: true, 3: true}, 3, nil, ""},
		{"newer", map[int]bool{1: true, 2: true, 3: true, 7: true}, 7, nil,
			"schema is at version 7, newer than this sandlot's 3 (it lacks migration 7)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Plan(ms, tc.applied)
			var pending []int
			for _, m := range st.Pending {
				pending = append(pending, m.Version)
			}
			if st.Current != tc.current || st.Latest != 3 || fmt.Sprint(pending) != fmt.Sprint(tc.pending) {
				t.Fatalf("Plan = current %d latest %d pending %v, want %d 3 %v", st.Current, st.Latest, pending, tc.current, tc.pending)
			}
			err := st.Err()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Err() = %v, want %q", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("Err() = %v, not failed_precondition", err)
			}
		})
	}
}
