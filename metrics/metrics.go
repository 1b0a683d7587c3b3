// Package metrics is the daemon's Prometheus metrics: what its services
// observe as they work (tool calls, commands, the store's transactions,
// the API's requests, forwarded calls) and, at each scrape, the state they
// hold (runs by project and state, jobs, pending access requests, the
// merge queue, disk used against quotas, the nodes' leases).
//
// Names and labels follow Prometheus's conventions (base units, _total on
// counters); no label carries a run id, a path or anything else without a
// bound, so a busy daemon's series stay as many as its projects, states,
// tools and rules.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paddock-dev/paddock"
)

const namespace = "paddock"

// Metrics holds the daemon's collectors in a registry of its own.
type Metrics struct {
	reg *prometheus.Registry

	events       *prometheus.CounterVec
	transitions  *prometheus.CounterVec
	storeUpdates *prometheus.HistogramVec
	storeErrors  *prometheus.CounterVec
	requests     *prometheus.HistogramVec
	streams      *prometheus.CounterVec
	toolCalls    *prometheus.HistogramVec
	callStages   *prometheus.HistogramVec
	decisions    *prometheus.CounterVec
	execs        *prometheus.HistogramVec
	sandboxFails *prometheus.CounterVec
	harnesses    *prometheus.HistogramVec
	degraded     *prometheus.CounterVec
	oomKills     prometheus.Counter
	forwards     *prometheus.HistogramVec
	webhooks     *prometheus.HistogramVec

	mu     sync.Mutex
	source func(context.Context) (*State, error)
	log    *slog.Logger
}

// Latency buckets: tool calls and API calls from a millisecond up,
// commands and transactions with room for minutes.
var (
	fastBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	slowBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
	// stageBuckets: a call's stages, from a read of the store (a tenth of
	// a millisecond) to a command's run (minutes).
	stageBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
)

// New makes the collectors and registers them, with Go's runtime and the
// process's own.
func New(log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.Default()
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: log}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	}
	m.events = counter("events_total", "Events recorded in committed store transactions, by type.", "type")
	m.transitions = counter("run_transitions_total", "Workspace state changes, by the state entered (created runs enter preparing or ready; rejects enter rejected).", "to")
	m.storeUpdates = histogram("store_update_duration_seconds", "Store write transactions (the events they append included), from the call to durable commit, by outcome.", slowBuckets, "outcome")
	m.storeErrors = counter("store_errors_total", "Store transactions that failed for another reason than the caller's own refusal, by error code.", "code")
	m.requests = histogram("http_request_duration_seconds", "API requests answered, by method, route (the route's pattern, never a run id) and status code; streams are counted in http_streams_total.", fastBuckets, "method", "route", "code")
	m.streams = counter("http_streams_total", "Streamed API requests (event streams, streamed and attached commands, MCP), by method, route and status code.", "method", "route", "code")
	m.toolCalls = histogram("tool_call_duration_seconds", "Tool calls through the broker (exec included), by tool, the run's access mode and outcome (ok, or the error code of a refusal by the broker or the tool).", fastBuckets, "tool", "access", "outcome")
	m.callStages = histogram("tool_call_stage_duration_seconds", "The stages of tool calls through the broker (exec included), by tool and stage: queue (waiting for the run: the look at its files after its last call, the lock of a call with an expected seq), read (the run, its grants, its project), claim (the idempotency key's claim, after the read), call (the call itself: a command's view, sandbox and output), record (its events' durable append).", stageBuckets, "tool", "stage")
	m.decisions = counter("broker_decisions_total", "The broker's decisions, by decision and the rule that decided (empty when allowed).", "decision", "rule")
	m.execs = histogram("exec_duration_seconds", "Commands run in the sandbox, by the run's access mode and the sandbox's mode (resident or per-exec).", slowBuckets, "access", "mode")
	m.sandboxFails = counter("sandbox_failures_total", "Commands the sandbox could not set up or run, by error code.", "code")
	m.harnesses = histogram("sandbox_harness_setup_duration_seconds", "Resident sandboxes (a run's harness) set up, by outcome (ok, or the error's code).", fastBuckets, "outcome")
	m.degraded = counter("enforcement_degraded_total", "Commands run with weaker enforcement than asked (allow_degraded), by the sandbox's mode.", "mode")
	m.oomKills = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "exec_oom_kills_total", Help: "Commands ended by the kernel's OOM killer at their memory limit."})
	m.webhooks = histogram("webhook_attempt_duration_seconds", "Webhook delivery attempts, by webhook (its name in paddock.toml) and outcome (delivered, failed: retried with back-off).", slowBuckets, "webhook", "outcome")
	m.forwards = histogram("forward_duration_seconds", "Calls forwarded to another node (PostgreSQL store), by outcome.", fastBuckets, "outcome")
	m.reg.MustRegister(m.events, m.transitions, m.storeUpdates, m.storeErrors, m.requests, m.streams, m.toolCalls, m.callStages,
		m.decisions, m.execs, m.sandboxFails, m.harnesses, m.degraded, m.oomKills, m.forwards, m.webhooks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		stateCollector{m})
	return m
}

// Handler serves the registry in Prometheus's exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{m.log}, Registry: m.reg})
}

// Registry is the registry, for tests that gather it directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetSource sets what a scrape reads the daemon's state from.
func (m *Metrics) SetSource(fn func(context.Context) (*State, error)) {
	m.mu.Lock()
	m.source = fn
	m.mu.Unlock()
}

// ToolCall observes a tool call the broker decided (and ran, if
// allowed): its latency by tool, access mode and outcome ("ok", or the
// error's code: a refusal by the broker or by the tool itself), and the
// broker's decision by rule.
func (m *Metrics) ToolCall(tool string, access paddock.Access, decision paddock.Decision, rule string, err error, d time.Duration) {
	outcome := "ok"
	if err != nil {
		outcome = string(paddock.ErrorCode(err))
	}
	m.toolCalls.WithLabelValues(tool, string(access), outcome).Observe(d.Seconds())
	m.decisions.WithLabelValues(string(decision), rule).Inc()
}

// CallStage observes one stage of a tool call through the broker
// (lifecycle.Stage*): where its time went.
func (m *Metrics) CallStage(tool, stage string, d time.Duration) {
	m.callStages.WithLabelValues(tool, stage).Observe(d.Seconds())
}

// Exec observes a command the sandbox ran to its end: the sandbox's mode
// (resident, per-exec), whether its enforcement was degraded, and
// whether the kernel's OOM killer ended it.
func (m *Metrics) Exec(access paddock.Access, mode string, degraded, oomKilled bool, d time.Duration) {
	m.execs.WithLabelValues(string(access), mode).Observe(d.Seconds())
	if degraded {
		m.degraded.WithLabelValues(mode).Inc()
	}
	if oomKilled {
		m.oomKills.Inc()
	}
}

// ExecFailed observes a command the sandbox could not run.
func (m *Metrics) ExecFailed(err error) {
	m.sandboxFails.WithLabelValues(string(paddock.ErrorCode(err))).Inc()
}

// HarnessStarted observes a run's harness set up (sandbox.Pool.OnStart).
func (m *Metrics) HarnessStarted(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = string(paddock.ErrorCode(err))
	}
	m.harnesses.WithLabelValues(outcome).Observe(d.Seconds())
}

// Request observes an API request answered by route (a pattern such as
// /v1/runs/{id}/exec).
func (m *Metrics) Request(method, route string, code int, streamed bool, d time.Duration) {
	c := strconv.Itoa(code)
	if streamed {
		m.streams.WithLabelValues(method, route, c).Inc()
		return
	}
	m.requests.WithLabelValues(method, route, c).Observe(d.Seconds())
}

// WebhookAttempt observes one delivery attempt of a webhook.
func (m *Metrics) WebhookAttempt(webhook string, delivered bool, d time.Duration) {
	outcome := "delivered"
	if !delivered {
		outcome = "failed"
	}
	m.webhooks.WithLabelValues(webhook, outcome).Observe(d.Seconds())
}

// Forwarded observes a call forwarded to another node.
func (m *Metrics) Forwarded(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.forwards.WithLabelValues(outcome).Observe(d.Seconds())
}

// update observes one store write transaction and the events it
// committed; callers says its error is the one the transaction's own
// function returned (not the store's).
func (m *Metrics) update(d time.Duration, err error, callers bool, events []string, states []paddock.WorkspaceState) {
	outcome := "committed"
	if err != nil {
		outcome = "failed"
		if !callers {
			// The store itself failed (I/O, a lost connection, a fenced
			// node, a commit refused).
			m.storeErrors.WithLabelValues(string(paddock.ErrorCode(err))).Inc()
			outcome = "error"
		}
	}
	m.storeUpdates.WithLabelValues(outcome).Observe(d.Seconds())
	if err != nil {
		return
	}
	for _, t := range events {
		m.events.WithLabelValues(t).Inc()
	}
	for _, s := range states {
		m.transitions.WithLabelValues(string(s)).Inc()
	}
}

// slogPrinter is promhttp's error log on slog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "err", v) }
