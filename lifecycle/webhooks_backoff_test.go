package lifecycle

import (
	"testing"
	"time"
)

// TestBackoff: the wait after the n-th failed attempt doubles from the
// first up to the most, each between half and all of it (jitter).
func TestBackoff(t *testing.T) {
	first, most := time.Second, 5*time.Minute
	for fails, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: 256 * time.Second, 10: most, 40: most} {
		lo, hi := full, time.Duration(0)
		for range 200 {
			d := backoff(first, most, fails)
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < full/2 || hi > full || hi-lo < full/10 {
			t.Errorf("after %d failures: waits from %v to %v, want within [%v, %v] and spread", fails, lo, hi, full/2, full)
		}
	}
}
