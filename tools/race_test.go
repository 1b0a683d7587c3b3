package tools

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSwapRace: while one goroutine swaps a directory for a link to the
// outside in a tight loop, 10,000 reads and writes through it never read
// outside content and never change anything outside.
func TestSwapRace(t *testing.T) {
	f := newFixture(t)
	d := filepath.Join(f.ws, "d")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "secret.txt"), []byte("inside\n"), 0o644)
	before := f.outsideDigest(t)

	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// d is a directory, then a link to ../outside, then a directory again.
			os.Rename(d, d+".real")
			os.Symlink("../outside", d)
			os.Remove(d)
			os.Rename(d+".real", d)
			swaps.Add(1)
		}
	}()
	const calls = 10000
	var outsideRead, ok atomic.Int64
	var cwg sync.WaitGroup
	for w := 0; w < 4; w++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for i := 0; i < calls/4; i++ {
				var res any
				var err error
				if i%2 == 0 {
					res, err = f.call(t, "read", map[string]any{"path": "d/secret.txt"})
				} else {
					res, err = f.call(t, "write", map[string]any{"path": "d/secret.txt", "content": "inside\n"})
				}
				if err == nil {
					ok.Add(1)
				}
				if leaks(res) {
					outsideRead.Add(1)
				}
			}
		}()
	}
	cwg.Wait()
	close(stop)
	wg.Wait()
	if outsideRead.Load() > 0 {
		t.Fatalf("%d reads returned outside content", outsideRead.Load())
	}
	if f.outsideDigest(t) != before {
		t.Fatal("outside changed")
	}
	entries, _ := os.ReadDir(f.outside)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "secret") && e.Name() != "dir" {
			t.Fatalf("a file appeared outside: %s", e.Name())
		}
	}
	t.Logf("%d calls (%d succeeded) during %d swaps", calls, ok.Load(), swaps.Load())
	if swaps.Load() < 100 {
		t.Fatalf("only %d swaps happened: the race was not exercised", swaps.Load())
	}
}
