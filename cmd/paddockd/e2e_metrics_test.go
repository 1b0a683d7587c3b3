package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// prometheusBin is Debian's Prometheus server, or "" (the test skips; it
// fails under CI, whose .ci/run installs it).
func prometheusBin(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (Debian's prometheus package; .ci/run installs it)", name)
		}
		t.Skipf("%s is not installed (apt-get install prometheus)", name)
	}
	return p
}

// TestMetricsScrapedByPrometheus: Debian's Prometheus server scrapes a
// real daemon doing real work, on the metrics listener without a token
// and on the API's listener with it, and the series answer through
// Prometheus's own query API: runs by project and state, tool calls by
// tool and decision, the broker's denials by rule, commands by sandbox
// mode, events and state changes, store transactions, API routes. The
// alerting rules in contrib/ load and evaluate there. No series names a
// run or a path.
func TestMetricsScrapedByPrometheus(t *testing.T) {
	prom := prometheusBin(t, "prometheus")
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := newRepo(t, filepath.Join(base, "src", "metrics-app"), 5)
	d := startDaemon(t, home, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	if d.info.MetricsListen == "" {
		t.Fatal("daemon.json names no metrics listener")
	}

	// Real work: a run that writes, is denied, runs commands and submits;
	// another that is rejected.
	cli(t, home, "project", "add", repo, "--name", "app", "--protect", "secrets/**").must(t)
	id := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	for i := range 3 {
		cli(t, home, "tool", id, "write", "--arg", fmt.Sprintf("path=src/m%d.go", i), "--arg", "content=package src\n").must(t)
	}
	cli(t, home, "tool", id, "write", "--arg", "path=secrets/key", "--arg", "content=x").wantCode(t, exitForbidden, "protected")
	for range 2 {
		cli(t, home, "exec", id, "--", "sh", "-c", "echo hi").must(t)
	}
	cli(t, home, "submit", id).must(t)
	other := strings.TrimSpace(cli(t, home, "create", "-p", "app").must(t).out)
	cli(t, home, "reject", other).must(t)
	reader := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--access", "read").must(t).out)
	cli(t, home, "tool", reader, "write", "--arg", "path=a", "--arg", "content=x").wantCode(t, exitForbidden, "")

	// Neither a run's id nor a path is a label value.
	body := get(t, "http://"+d.info.MetricsListen+"/metrics", "")
	for _, s := range []string{id, other, reader, repo, home} {
		if strings.Contains(body, s) {
			t.Errorf("/metrics names %q", s)
		}
	}
	// The API's listener: the operator's token, and nothing without it.
	resp, err := http.Get("http://" + d.info.Listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics on the API's listener without the token: %d", resp.StatusCode)
	}

	// Prometheus, on loopback, scraping both every second.
	wd, _ := os.Getwd()
	rules := filepath.Join(wd, "..", "..", "contrib", "prometheus", "alerts.yml")
	addr := freeAddr(t)
	cfg := filepath.Join(base, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: paddock
    static_configs: [{targets: [%q]}]
  - job_name: paddock-api
    authorization: {credentials_file: %q}
    static_configs: [{targets: [%q]}]
`, rules, d.info.MetricsListen, filepath.Join(home, "token"), d.info.Listen)), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(base, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	logf, _ := os.Create(filepath.Join(base, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})

	for _, c := range []struct {
		query string
		want  func(float64) bool
		what  string
	}{
		{`up{job="paddock"}`, eq(1), "the metrics listener is scraped"},
		{`up{job="paddock-api"}`, eq(1), "the API's listener is scraped with the token"},
		{`paddock_state_scrape_success{job="paddock"}`, eq(1), "the state is read at each scrape"},
		{`sum(paddock_runs{job="paddock",project="app"})`, eq(3), "the runs counted by project"},
		{`sum(paddock_runs{job="paddock",project="app",state=~"rejected|cleanup_pending|cleaned"})`, eq(1), "the rejected run by its state"},
		{`sum(paddock_tool_call_duration_seconds_count{job="paddock",tool="write",outcome="ok"})`, eq(3), "three writes answered"},
		{`sum(paddock_tool_call_duration_seconds_count{job="paddock",tool="write",outcome="forbidden"})`, eq(2), "the protected write and the read run's, refused"},
		{`sum(paddock_tool_call_stage_duration_seconds_count{job="paddock",tool="write",stage="read"})`, eq(5), "each write's read of its run, timed as a stage"},
		{`sum(paddock_tool_call_stage_duration_seconds_count{job="paddock",tool="exec",stage="call"})`, eq(2), "each command's run, timed as a stage"},
		{`paddock_broker_decisions_total{job="paddock",decision="deny",rule="read_only"}`, eq(1), "the read run's write denied by the broker, by its rule"},
		{`sum(paddock_exec_duration_seconds_count{job="paddock",mode=~"resident|per-exec"})`, eq(2), "two commands, by sandbox mode"},
		{`sum(paddock_sandbox_harness_setup_duration_seconds_count{job="paddock",outcome="ok"})`, gt(0), "the run's harness set up"},
		{`paddock_events_total{job="paddock",type="changeset.submitted"}`, eq(1), "the submission's event"},
		{`paddock_run_transitions_total{job="paddock",to="rejected"}`, eq(1), "the rejection's state change"},
		{`sum(paddock_store_update_duration_seconds_count{job="paddock",outcome="committed"})`, gt(10), "store transactions timed"},
		{`sum(paddock_http_request_duration_seconds_count{job="paddock",route="/v1/runs/{id}/tools/{name}"})`, eq(5), "tool calls by route, not by run"},
		{`sum(paddock_run_disk_quota_used_ratio_count{job="paddock"})`, func(v float64) bool { return v >= 0 }, "disk use against quotas"},
	} {
		v, err := waitQuery(addr, c.query, c.want)
		if err != nil {
			t.Errorf("%s: %s: %v", c.what, c.query, err)
		} else {
			t.Logf("%s = %v", c.query, v)
		}
	}
	// Every query of contrib's Grafana dashboard is one Prometheus takes,
	// with the dashboard's variables as Grafana fills them.
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile(filepath.Join(wd, "..", "..", "contrib", "grafana", "paddock.json"))
	if err != nil || json.Unmarshal(b, &dash) != nil || len(dash.Panels) == 0 {
		t.Fatalf("contrib/grafana/paddock.json: %v", err)
	}
	fill := strings.NewReplacer("$job", "paddock", "$instance", ".*", "$__rate_interval", "1m")
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := fill.Replace(tg.Expr)
			var a struct{ Status, Error string }
			json.Unmarshal([]byte(get(t, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(q), "")), &a)
			if a.Status != "success" {
				t.Errorf("dashboard panel %q: %s: %s", p.Title, q, a.Error)
			}
		}
	}

	// The alerting rules loaded, and evaluate without error.
	var rulesAnswer struct {
		Data struct {
			Groups []struct {
				Name  string
				Rules []struct {
					Name, Health, LastError string
				}
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		json.Unmarshal([]byte(get(t, "http://"+addr+"/api/v1/rules", "")), &rulesAnswer)
		n, bad := 0, []string{}
		for _, g := range rulesAnswer.Data.Groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" {
					bad = append(bad, r.Name+": "+r.Health+" "+r.LastError)
				}
			}
		}
		if n > 0 && len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alerting rules: %d loaded, not ok: %v", n, bad)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func gt(want float64) func(float64) bool { return func(v float64) bool { return v > want } }

// waitQuery asks Prometheus's query API until the query's one value
// satisfies want, for up to 30 s.
func waitQuery(addr, query string, want func(float64) bool) (float64, error) {
	deadline := time.Now().Add(30 * time.Second)
	last := "no answer"
	for {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
		if err == nil {
			var a struct {
				Status string
				Data   struct {
					Result []struct {
						Value []any
					}
				}
			}
			json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			last = fmt.Sprintf("%s, %d series", a.Status, len(a.Data.Result))
			if a.Status == "success" && len(a.Data.Result) == 1 && len(a.Data.Result[0].Value) == 2 {
				s, _ := a.Data.Result[0].Value[1].(string)
				v, _ := strconv.ParseFloat(s, 64)
				last = "value " + s
				if want(v) {
					return v, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("after 30s: %s", last)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func get(t *testing.T, u, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestAlertRules: contrib's alerting rules are valid Prometheus rules, and
// fire on the series they watch (promtool's own rule tests).
func TestAlertRules(t *testing.T) {
	promtool := prometheusBin(t, "promtool")
	dir := filepath.Join("..", "..", "contrib", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
