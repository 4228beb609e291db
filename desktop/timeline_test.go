package desktop

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTimeline(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Phase
	}{
		{"empty", "", nil},
		{"sorted, first time kept", "x 2000\nstart:Xvfb 1500\nx 2500\nwm 3000\n", []Phase{
			{"start:Xvfb", time.UnixMilli(1500)}, {"x", time.UnixMilli(2000)}, {"wm", time.UnixMilli(3000)}}},
		{"junk skipped", "garbage\nx notanumber\n 1234\nstream 4000 extra\nstart:sandbox 100", []Phase{
			{"start:sandbox", time.UnixMilli(100)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseTimeline(tc.in)); diff != "" {
				t.Errorf("parseTimeline (-want +got):\n%s", diff)
			}
		})
	}
}
