package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/client"
)

// keyedCall is a raw call to a daemon's socket with an idempotency key.
type keyedCall struct {
	status   int
	replayed bool
	body     string
}

func keyedPost(t *testing.T, home, path, key, body string, header ...string) keyedCall {
	t.Helper()
	k, err := keyedSend(home, path, key, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyedSend(home, path, key, body string, header ...string) (keyedCall, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(home, "paddock.sock"))
	}}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, "http://paddock"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(paddock.IdempotencyHeader, key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return keyedCall{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return keyedCall{status: resp.StatusCode, replayed: resp.Header.Get(paddock.ReplayedHeader) == "true", body: string(b)}, nil
}

// toolCalls counts run id's tool.call events whose data holds what.
func toolCalls(t *testing.T, c *client.Client, id, what string) int {
	t.Helper()
	evs, err := c.Events(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if (e.Type == paddock.EventToolCall || e.Type == paddock.EventExec) && bytes.Contains(e.Data, []byte(what)) {
			n++
		}
	}
	return n
}

// TestIdempotencyKeys: a write made again with its key, through the real
// daemon, is done once and answered with its first answer, marked
// replayed, whether the first has ended or is still being made (then the
// client library waits for it); the same key on another call is refused,
// and from another caller (the operator acting for the run's agent) is
// another call; a call that refused before doing anything gives its key
// back; a key whose daemon was killed mid-call is answered as cut short,
// never made again.
func TestIdempotencyKeys(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	repo := newRepo(t, filepath.Join(tmp, "src", "app"), 3)
	d := startDaemon(t, home)
	cli(t, home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", "clone").must(t).out)
	c := client.Unix(filepath.Join(home, "paddock.sock"))
	write := "/v1/runs/" + id + "/tools/write"

	first := keyedPost(t, home, write, "k-1", `{"path":"once.txt","content":"one"}`)
	again := keyedPost(t, home, write, "k-1", `{"path":"once.txt","content":"one"}`)
	if first.status != 200 || first.replayed || again.status != 200 || !again.replayed || again.body != first.body {
		t.Fatalf("a write made again with its key:\nfirst %+v\nagain %+v", first, again)
	}
	if n := toolCalls(t, c, id, `"once.txt"`); n != 1 {
		t.Fatalf("the write is in the run's events %d times", n)
	}
	// The key names one call: another body is refused, and nothing is written.
	if other := keyedPost(t, home, write, "k-1", `{"path":"once.txt","content":"two"}`); other.status != 409 || !strings.Contains(other.body, "another call") {
		t.Fatalf("the key on another call: %+v", other)
	}
	// Another caller's key is its own.
	if agent := keyedPost(t, home, write, "k-1", `{"path":"once.txt","content":"one"}`, paddock.AgentHeader, "1"); agent.status != 200 || agent.replayed {
		t.Fatalf("the same key from the operator acting for the agent: %+v", agent)
	}
	if n := toolCalls(t, c, id, `"once.txt"`); n != 2 {
		t.Fatalf("after another caller's call, the write is in the run's events %d times, want 2", n)
	}
	// A malformed key is refused before anything is done.
	if bad := keyedPost(t, home, write, "has space", `{"path":"bad.txt","content":"x"}`); bad.status != 400 || toolCalls(t, c, id, `"bad.txt"`) != 0 {
		t.Fatalf("a key with a space: %+v", bad)
	}

	// A call still being made: the same key waits for it a while (2s),
	// then is told so (busy, in_progress), and the client library waits
	// for its answer, which is the first's.
	exec := "/v1/runs/" + id + "/exec"
	slowReq := paddock.ExecRequest{Argv: []string{"sh", "-c", "sleep 4; echo slept-once"}}
	b, _ := json.Marshal(slowReq) // the client library's body, byte for byte: the key names it
	slow := string(b)
	done := make(chan keyedCall, 1)
	go func() {
		k, err := keyedSend(home, exec, "k-slow", slow)
		if err != nil {
			k.body = err.Error()
		}
		done <- k
	}()
	time.Sleep(400 * time.Millisecond)
	if busy := keyedPost(t, home, exec, "k-slow", slow); busy.status != http.StatusLocked || !strings.Contains(busy.body, `"in_progress":true`) {
		t.Fatalf("the same key while its call runs: %+v", busy)
	}
	res, err := c.Exec(client.WithIdempotencyKey(context.Background(), "k-slow"), id, slowReq)
	if err != nil {
		t.Fatalf("the client library's call with the key of a call still being made: %v", err)
	}
	firstExec := <-done
	if firstExec.status != 200 || !strings.Contains(firstExec.body, "slept-once") || res.Stdout != "slept-once\n" {
		t.Fatalf("the slow call %+v; the client's answer %+v", firstExec, res)
	}
	if n := toolCalls(t, c, id, "slept-once"); n != 1 {
		t.Fatalf("the slow command ran %d times", n)
	}

	// The same with expect_seq: the call made again is told so after the
	// same wait, not held until its first attempt ends and then told its
	// answer was lost (it waited for its claim holding the run's stripe).
	r, err := c.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	seqExec := exec + "?expect_seq=" + strconv.FormatInt(r.LastSeq, 10)
	sb, _ := json.Marshal(paddock.ExecRequest{Argv: []string{"sh", "-c", "sleep 6; echo slept-seq"}})
	seqDone := make(chan keyedCall, 1)
	go func() {
		k, err := keyedSend(home, seqExec, "k-seq", string(sb))
		if err != nil {
			k.body = err.Error()
		}
		seqDone <- k
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	seqAgain := keyedPost(t, home, seqExec, "k-seq", string(sb))
	took := time.Since(start)
	if first := <-seqDone; first.status != 200 || !strings.Contains(first.body, "slept-seq") {
		t.Fatalf("the first attempt with expect_seq: %+v", first)
	}
	if seqAgain.status != http.StatusLocked || !strings.Contains(seqAgain.body, `"in_progress":true`) || took > 4*time.Second {
		t.Fatalf("made again with expect_seq while its first attempt ran, answered after %v: %+v", took, seqAgain)
	}
	if replay := keyedPost(t, home, seqExec, "k-seq", string(sb)); replay.status != 200 || !replay.replayed {
		t.Fatalf("asked once more: %+v", replay)
	}

	// A command whose caller goes ends, key or not (paddock exec --json
	// interrupted); asked again with its key, it is not run again.
	interrupted := paddock.ExecRequest{Argv: []string{"sh", "-c", "sleep 30; echo interrupted-never"}}
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if _, err := c.Exec(client.WithIdempotencyKey(cctx, "k-interrupted"), id, interrupted); err == nil {
		t.Fatal("an exec whose caller went answered")
	}
	cancel()
	for end := time.Now().Add(10 * time.Second); toolCalls(t, c, id, "interrupted-never") == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("a keyed command whose caller went still runs after 10s")
		}
	}
	b, _ = json.Marshal(interrupted)
	if again := keyedPost(t, home, exec, "k-interrupted", string(b)); again.status == 200 && !again.replayed {
		t.Fatalf("the interrupted command asked again with its key: %+v", again)
	}
	if n := toolCalls(t, c, id, "interrupted-never"); n != 1 {
		t.Fatalf("the interrupted command ran %d times", n)
	}

	// A call refused before it did anything (no such tool here: a
	// refusal that says done: false is rarer; a run that is busy is
	// neither) keeps its answer: made again, it is answered the same.
	if r1, r2 := keyedPost(t, home, "/v1/runs/"+id+"/tools/nosuch", "k-no", `{}`), keyedPost(t, home, "/v1/runs/"+id+"/tools/nosuch", "k-no", `{}`); r1.status < 400 || r2.status != r1.status || !r2.replayed {
		t.Fatalf("a refused call made again: %+v %+v", r1, r2)
	}

	// The daemon killed while a keyed call runs: once back, the key is
	// answered as cut short, and the call is not made again.
	go keyedSend(home, exec, "k-cut", `{"argv":["sh","-c","sleep 30; echo never"]}`) // its answer never comes
	time.Sleep(500 * time.Millisecond)
	d.kill9()
	killHarnesses(home)
	startDaemon(t, home)
	cut := keyedPost(t, home, exec, "k-cut", `{"argv":["sh","-c","sleep 30; echo never"]}`)
	if cut.status != 409 || !strings.Contains(cut.body, "another daemon") {
		t.Fatalf("a key whose daemon was killed mid-call: %+v", cut)
	}
}
