// Command mcp measures what MCP adds to a run's tool calls: the same read
// of a 4 KiB file, and the same exec of /bin/true, made by an agent
// through each way paddock serves a run, in rounds in one run so that the
// machine's noise falls on every way alike:
//
//   - the plain API (client.Client on the daemon's unix socket, with the
//     run's own token): POST /v1/runs/{id}/tools/read and /v1/runs/{id}/exec,
//     the baseline;
//   - MCP over stdio: a real `paddock mcp RUN` child, reached with the MCP
//     Go SDK's client (CommandTransport); it makes the API call itself;
//   - MCP over streamable HTTP: the daemon's /v1/runs/{id}/mcp on the same
//     socket with the run's token (the SDK's StreamableClientTransport);
//   - the plain API again, on a run an idle MCP session follows: an MCP
//     server follows its run's events, and each call wakes it; this way
//     shows what that costs apart from the protocol;
//   - for exec, the API's streaming exec too (/v1/runs/{id}/exec/stream),
//     which is what MCP's exec tool calls, so that what the stream costs
//     stands apart from what MCP costs.
//
// Each way has its own run, all alike (one project, one 4 KiB file): on a
// shared run every call would wake every MCP server. Each round makes a
// block of calls on every way in turn, in an order drawn afresh each
// round; the first round warms every way and the first call of each block
// pays for what the previous way left running, so neither is counted.
// Every answer is checked (the file's content, exit code 0), and at the
// end each run's event log must hold one event for every call made on it.
// It prints p50 and p99 of each way and their ratios to the API's in the
// same run; nothing is asserted of absolute times. The daemon and every
// child end with it, on failure too: the bench is the subreaper of what
// it starts, and anything left behind is killed and reported as an error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/bench/internal/benchutil"
	"github.com/paddock-dev/paddock/client"
)

func main() {
	quick := flag.Bool("quick", false, "small workload for a CI smoke run")
	reads := flag.Int("reads", 10000, "read calls per way")
	readBlock := flag.Int("read-block", 100, "reads a way makes in a row, in each round")
	execs := flag.Int("execs", 1000, "execs of /bin/true per way")
	execBlock := flag.Int("exec-block", 20, "execs a way makes in a row, in each round")
	flag.Parse()
	if *quick {
		*reads, *readBlock, *execs, *execBlock = 300, 31, 40, 11
	}
	if *reads < 1 || *execs < 1 || *readBlock < 2 || *execBlock < 2 {
		fmt.Fprintln(os.Stderr, "bench: --reads and --execs must be at least 1, the blocks at least 2")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := benchutil.Subreaper()
	if err == nil {
		err = run(ctx, *reads, *readBlock, *execs, *execBlock)
	}
	// Every child has been waited for by now: what is left, the daemon or
	// a child left behind.
	if left := benchutil.Leftovers(10 * time.Second); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("processes left behind after the daemon stopped, killed: %s", strings.Join(left, "; ")))
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// way is one way of reaching the run's tools.
type way struct {
	name string
	run  string                                             // its run, one for each way (the API's streaming exec shares the API's)
	read func(context.Context) (string, error)              // the file's content
	exec func(context.Context) (*paddock.ExecResult, error) // nil: no exec this way

	reads, execs int // calls made, counted or not
}

const page = "page.txt"

// pageContent is page's: 4 KiB.
var pageContent = strings.Repeat("0123456789abcdef", 256)

// execTrue is the exec every way makes.
var execTrue = paddock.ExecRequest{Argv: []string{"/bin/true"}}

// run starts a daemon on a one-file project, reaches a run of it each way,
// times the reads and the execs of every way in rounds, checks the runs'
// events and prints the table.
func run(ctx context.Context, nreads, readBlock, nexecs, execBlock int) (err error) {
	tmp, err := os.MkdirTemp("", "paddock-bench-mcp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	repo := filepath.Join(tmp, "repo")
	if err := makeRepo(repo); err != nil {
		return err
	}
	d, err := benchutil.StartDaemon(ctx, tmp)
	if err != nil {
		return err
	}
	defer d.Stop()
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: the daemon's log ends:\n%s\n", d.LogTail(40))
		}
	}()
	if _, err := d.Client.AddProject(ctx, paddock.AddProjectRequest{Path: repo, Name: "bench"}); err != nil {
		return err
	}
	// One run for each way, alike: an MCP server follows its run's events,
	// and each of its calls wakes it, which is that way's cost; on a shared
	// run every call would pay for every server.
	bootstrap := func() (*paddock.BootstrapResult, error) {
		return d.Client.Bootstrap(ctx, paddock.BootstrapRequest{Project: "bench", Task: "bench", Agent: paddock.AgentDefinition{Name: "bench"}})
	}
	sock := filepath.Join(d.Home, "paddock.sock")

	// (a) The plain API, as an agent holding its run's token; its
	// streaming exec on the same run.
	ba, err := bootstrap()
	if err != nil {
		return err
	}
	api := d.Client.WithToken(ba.Token)
	apiWay := agentWay("API", api, ba.Run.ID)
	streamWay := &way{name: "the API's streaming exec (POST /exec/stream, what MCP's exec calls)", run: ba.Run.ID,
		exec: func(ctx context.Context) (*paddock.ExecResult, error) {
			return api.ExecStream(ctx, ba.Run.ID, execTrue, nil, nil)
		},
	}

	// (b) MCP on stdio: paddock mcp RUN as the agent's MCP server.
	bs, err := bootstrap()
	if err != nil {
		return err
	}
	stdio, err := stdioSession(ctx, filepath.Join(tmp, "paddock"), d.Home, bs.Run.ID)
	if err != nil {
		return err
	}
	defer stdio.Close()

	// (c) MCP over streamable HTTP on the daemon's socket, with the run's token.
	bh, err := bootstrap()
	if err != nil {
		return err
	}
	onSocket := socketTransport(sock)
	streamable, err := httpSession(ctx, "bench-http", bh, onSocket)
	if err != nil {
		return err
	}
	defer streamable.Close()

	// (d) The API again, on a run an idle MCP session follows: what the
	// server's following its run's events costs the calls, apart from
	// the protocol.
	bw, err := bootstrap()
	if err != nil {
		return err
	}
	idle, err := httpSession(ctx, "bench-idle", bw, onSocket)
	if err != nil {
		return err
	}
	defer idle.Close()
	watchedWay := agentWay("the API, on a run an idle MCP session (streamable HTTP) follows", d.Client.WithToken(bw.Token), bw.Run.ID)

	stdioWay := mcpWay("MCP on stdio (`paddock mcp RUN`, which calls the API)", bs.Run.ID, stdio)
	httpWay := mcpWay("MCP over streamable HTTP (/v1/runs/{id}/mcp on the same socket, the run's token)", bh.Run.ID, streamable)
	readWays := []*way{apiWay, stdioWay, httpWay, watchedWay}
	benchutil.Step("%d reads of a 4 KiB file on each of %d ways, in rounds of %d a way", nreads, len(readWays), readBlock)
	readLat, err := rounds(ctx, nreads, readBlock, readers(readWays))
	if err != nil {
		return err
	}

	execWays := []*way{apiWay, streamWay, stdioWay, httpWay, watchedWay}
	benchutil.Step("%d execs of /bin/true on each of %d ways, in rounds of %d a way", nexecs, len(execWays), execBlock)
	execLat, err := rounds(ctx, nexecs, execBlock, execers(execWays))
	if err != nil {
		return err
	}

	benchutil.Step("checking the runs' events")
	if err := checkRuns(ctx, d.Client, []string{ba.Run.ID, bs.Run.ID, bh.Run.ID, bw.Run.ID}, execWays); err != nil {
		return err
	}

	printTable(benchutil.Machine(tmp), readWays, readLat, nreads, execWays, execLat, nexecs)
	return nil
}

// checkRuns checks each run's events against the calls the ways made on it.
func checkRuns(ctx context.Context, c *client.Client, runs []string, ways []*way) error {
	for _, id := range runs {
		var reads, execs int
		for _, w := range ways {
			if w.run == id {
				reads, execs = reads+w.reads, execs+w.execs
			}
		}
		if err := checkEvents(ctx, c, id, reads, execs); err != nil {
			return err
		}
	}
	return nil
}

// printTable prints the figures: the API's reads and execs, then every
// other way's against the API's in the same rounds.
func printTable(machine string, readWays []*way, readLat [][]time.Duration, nreads int, execWays []*way, execLat [][]time.Duration, nexecs int) {
	fmt.Printf("\n%s\n\n| figure | paddock | peer | ratio |\n|---|---|---|---|\n", machine)
	fmt.Printf("| read of a 4 KiB file through the API (unix socket, the run's token, a durable event each), a one-file repository, %d calls in rounds with the MCP reads | %s | – | – |\n",
		nreads, p50p99(readLat[0]))
	for i := 1; i < len(readWays); i++ {
		fmt.Printf("| the same read through %s, %d calls | %s | the API in that run: %s | %s |\n",
			readWays[i].name, nreads, p50p99(readLat[i]), p50p99(readLat[0]), ratios(readLat[i], readLat[0]))
	}
	fmt.Printf("| exec /bin/true through the API (POST /exec), the same runs, %d execs in rounds with the others | %s | – | – |\n",
		nexecs, p50p99(execLat[0]))
	for i := 1; i < len(execWays); i++ {
		fmt.Printf("| the same exec through %s, %d execs | %s | the API in that run: %s | %s |\n",
			execWays[i].name, nexecs, p50p99(execLat[i]), p50p99(execLat[0]), ratios(execLat[i], execLat[0]))
	}
}

// makeRepo makes the project: a git repository whose one commit holds page.
func makeRepo(repo string) error {
	return benchutil.Repo(repo, map[string]string{page: pageContent})
}

// stdioSession starts `paddock mcp RUN` (bin) for the daemon at home as
// an MCP server on stdio, and connects to it.
func stdioSession(ctx context.Context, bin, home, run string) (*mcp.ClientSession, error) {
	cmd := exec.Command(bin, "mcp", run, "--home", home)
	cmd.Env = append(os.Environ(), "PADDOCK_NO_AUTOSTART=1")
	cmd.Stderr = os.Stderr
	s, err := mcp.NewClient(&mcp.Implementation{Name: "bench-stdio", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("paddock mcp: %w", err)
	}
	return s, nil
}

// socketTransport reaches the daemon's unix socket whatever the URL's host.
func socketTransport(sock string) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", sock)
		}}
}

// httpSession connects, as the client name, to the MCP endpoint of the
// bootstrapped run b over streamable HTTP, with b's token.
func httpSession(ctx context.Context, name string, b *paddock.BootstrapResult, next http.RoundTripper) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: bearer{b.Token, next}}
	s, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://paddock/v1/runs/" + b.Run.ID + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		return nil, fmt.Errorf("MCP over HTTP: %w", err)
	}
	return s, nil
}

// agentWay calls the run's read tool and exec through the API, as c (an
// agent's client, with its run's token).
func agentWay(name string, c *client.Client, run string) *way {
	return &way{name: name, run: run,
		read: func(ctx context.Context) (string, error) {
			raw, err := c.CallTool(ctx, run, "read", map[string]string{"path": page})
			if err != nil {
				return "", err
			}
			return readContent(raw)
		},
		exec: func(ctx context.Context) (*paddock.ExecResult, error) { return c.Exec(ctx, run, execTrue) },
	}
}

// readers are the ways' reads, each checked and counted.
func readers(ways []*way) []func(context.Context) error {
	calls := make([]func(context.Context) error, len(ways))
	for i, w := range ways {
		calls[i] = func(ctx context.Context) error {
			got, err := w.read(ctx)
			if err != nil {
				return fmt.Errorf("read, %s: %w", w.name, err)
			}
			if got != pageContent {
				return fmt.Errorf("read, %s: %d bytes that are not the file's", w.name, len(got))
			}
			w.reads++
			return nil
		}
	}
	return calls
}

// execers are the ways' execs, each checked and counted.
func execers(ways []*way) []func(context.Context) error {
	calls := make([]func(context.Context) error, len(ways))
	for i, w := range ways {
		calls[i] = func(ctx context.Context) error {
			res, err := w.exec(ctx)
			if err != nil {
				return fmt.Errorf("exec, %s: %w", w.name, err)
			}
			if res.ExitCode != 0 || res.Signal != "" {
				return fmt.Errorf("exec, %s: /bin/true exited %d %s", w.name, res.ExitCode, res.Signal)
			}
			w.execs++
			return nil
		}
	}
	return calls
}

// mcpWay calls the run's read and exec tools over an MCP session.
func mcpWay(name, run string, s *mcp.ClientSession) *way {
	call := func(ctx context.Context, tool string, args any, out any) error {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return err
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if res.IsError {
			return fmt.Errorf("tool error: %s", text.String())
		}
		return json.Unmarshal([]byte(text.String()), out)
	}
	return &way{name: name, run: run,
		read: func(ctx context.Context) (string, error) {
			var r readResult
			err := call(ctx, "read", map[string]string{"path": page}, &r)
			return r.Content, err
		},
		exec: func(ctx context.Context) (*paddock.ExecResult, error) {
			// Over MCP the enforcement is a summary for the model (its
			// limits written as durations), not the record: only the
			// outcome is read here.
			var r struct {
				ExitCode int    `json:"exit_code"`
				Signal   string `json:"signal"`
			}
			err := call(ctx, "exec", map[string]any{"argv": []string{"/bin/true"}}, &r)
			return &paddock.ExecResult{ExitCode: r.ExitCode, Signal: r.Signal}, err
		},
	}
}

// readResult is what a read answers, as much of it as the bench checks.
type readResult struct {
	Content string `json:"content"`
}

func readContent(raw json.RawMessage) (string, error) {
	var r readResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", fmt.Errorf("decode the read's answer: %w", err)
	}
	return r.Content, nil
}

// rounds makes n counted calls on every way, in rounds: each round makes
// block calls on each way in turn, the ways in an order drawn afresh each
// round. The first round warms every way and is not counted, nor is the
// first call of every block, which pays for what the previous way left
// running (an MCP server's answer to the events of its calls). A call's
// time is its round trip with its answer decoded and checked, the same
// small work on every way. It returns each way's times.
func rounds(ctx context.Context, n, block int, calls []func(context.Context) error) ([][]time.Duration, error) {
	lat := make([][]time.Duration, len(calls))
	for i := range lat {
		lat[i] = make([]time.Duration, 0, n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	for r := 0; len(lat[0]) < n; r++ {
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, j := range order {
			for k := 0; k < block && len(lat[j]) < n; k++ {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				t0 := time.Now()
				if err := calls[j](ctx); err != nil {
					return nil, err
				}
				if r > 0 && k > 0 {
					lat[j] = append(lat[j], time.Since(t0))
				}
			}
		}
	}
	return lat, nil
}

// checkEvents holds that the run's log records every call the bench made:
// each read a tool.call, each exec an exec.
func checkEvents(ctx context.Context, c *client.Client, id string, reads, execs int) error {
	evs, err := c.Events(ctx, id, 0, 1<<30)
	if err != nil {
		return err
	}
	var gotReads, gotExecs int
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			return fmt.Errorf("event %d has seq %d", i, e.Seq)
		}
		switch e.Type {
		case "tool.call":
			gotReads++
		case "exec":
			gotExecs++
		}
	}
	if gotReads != reads || gotExecs != execs {
		return fmt.Errorf("the run's log holds %d tool calls and %d execs, but the bench made %d reads and %d execs", gotReads, gotExecs, reads, execs)
	}
	return nil
}

func p50p99(ds []time.Duration) string {
	return fmt.Sprintf("p50 %s, p99 %s", benchutil.Round(benchutil.Percentile(ds, 50)), benchutil.Round(benchutil.Percentile(ds, 99)))
}

// ratios are p50 and p99 of ours over the peer's.
func ratios(ours, peer []time.Duration) string {
	r := func(p float64) float64 {
		return float64(benchutil.Percentile(ours, p)) / float64(benchutil.Percentile(peer, p))
	}
	return fmt.Sprintf("p50 %.2f×, p99 %.2f×", r(50), r(99))
}

// bearer adds the run's token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
