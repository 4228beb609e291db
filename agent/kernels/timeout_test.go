package kernels

import (
	"testing"
	"time"
)

func TestTimeoutBounds(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 60 * time.Second},
		{-5, 60 * time.Second},
		{1500, 1500 * time.Millisecond},
		{600_000, 600 * time.Second},
		{600_001, 600 * time.Second},
		{9223372036855, 600 * time.Second}, // ms*1e6 overflows int64
	} {
		if got := Timeout(tc.ms); got != tc.want {
			t.Errorf("Timeout(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}
