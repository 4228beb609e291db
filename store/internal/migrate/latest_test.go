package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLatest(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		want int
	}{
		{"newest by number, not by name order", fstest.MapFS{"m/0002_b.sql": {}, "m/0010_a.sql": {}, "m/0009_c.sql": {}}, 10},
		{"none", fstest.MapFS{"m/README": {}}, 0},
		{"a bad name loads nothing", fstest.MapFS{"m/x.sql": {}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Latest(tc.fs, "m"); got != tc.want {
				t.Errorf("Latest = %d, want %d", got, tc.want)
			}
		})
	}
}
