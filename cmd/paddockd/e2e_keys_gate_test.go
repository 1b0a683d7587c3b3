package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// TestKeyedRetryWithExpectSeqWhileItsCallRuns: a keyed exec that carries
// expect_seq made again with its key while its first attempt still runs
// is answered as any retry is (busy, in_progress, after keyedWait), not
// held until the first attempt ends and then told its answer was lost.
func TestKeyedRetryWithExpectSeqWhileItsCallRuns(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	repo := newRepo(t, filepath.Join(tmp, "src", "app"), 3)
	startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	c := client.Unix(filepath.Join(home, "paddock.sock"))
	r, err := c.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	exec := fmt.Sprintf("/v1/runs/%s/exec?expect_seq=%d", id, r.LastSeq)
	b, _ := json.Marshal(paddock.ExecRequest{Argv: []string{"sh", "-c", "sleep 6; echo slept-once"}})
	done := make(chan keyedCall, 1)
	go func() {
		k, err := keyedSend(home, exec, "k-seq", string(b))
		if err != nil {
			k.body = err.Error()
		}
		done <- k
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	again := keyedPost(t, home, exec, "k-seq", string(b))
	took := time.Since(start)
	first := <-done
	if first.status != 200 || !strings.Contains(first.body, "slept-once") {
		t.Fatalf("the first attempt: %+v", first)
	}
	if again.status != http.StatusLocked || !strings.Contains(again.body, `"in_progress":true`) || took > 4*time.Second {
		t.Fatalf("made again while its first attempt ran, answered after %v: %+v", took, again)
	}
	// The first attempt's answer was recorded all along.
	if replay := keyedPost(t, home, exec, "k-seq", string(b)); replay.status != 200 || !replay.replayed {
		t.Fatalf("asked once more: %+v", replay)
	}
}
