package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/paddock-dev/paddock/postgres/pgtest"
)

// otlpReceiver is an OTLP/HTTP traces endpoint on loopback that keeps
// every span it is sent, with its resource's service.instance.id.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	instance string
	span     *tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "not an OTLP traces export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		inst := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.instance.id" {
				inst = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				o.spans = append(o.spans, receivedSpan{inst, sp})
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// find waits up to 30 s for a span of trace tid named name.
func (o *otlpReceiver) find(t *testing.T, tid []byte, name string) receivedSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o.mu.Lock()
		var names []string
		for _, s := range o.spans {
			if string(s.span.TraceId) == string(tid) {
				if s.span.Name == name {
					o.mu.Unlock()
					return s
				}
				names = append(names, s.span.Name)
			}
		}
		o.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no span %q in the trace; its spans: %q", name, names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// child waits up to 30 s for a span of trace tid named name whose parent
// is the span parent.
func (o *otlpReceiver) child(t *testing.T, tid []byte, name string, parent []byte) receivedSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o.mu.Lock()
		var seen []string
		for _, s := range o.spans {
			if string(s.span.TraceId) != string(tid) {
				continue
			}
			if s.span.Name == name && string(s.span.ParentSpanId) == string(parent) {
				o.mu.Unlock()
				return s
			}
			seen = append(seen, fmt.Sprintf("%s (parent %x)", s.span.Name, s.span.ParentSpanId))
		}
		o.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no span %q under %x in the trace; its spans: %q", name, parent, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			if v := a.GetValue().GetStringValue(); v != "" {
				return v
			}
			return fmt.Sprint(a.GetValue().GetIntValue())
		}
	}
	return ""
}

// TestTracesAcrossNodes: an orchestrator's traceparent is honoured, and
// a call forwarded to another node carries the trace on. Two nodes on one
// PostgreSQL export their spans over OTLP to a receiver on loopback; an
// exec sent to the node that does not hold the run, under the
// orchestrator's span, is a trace in which that node's server span is the
// orchestrator's child, the holding node's server span its child, and
// under it the broker's tool call and the sandbox's command, with the run
// and project as attributes.
func TestTracesAcrossNodes(t *testing.T) {
	base := t.TempDir()
	url := pgtest.Need(t).URL(t, base)
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // export within 0.1 s, not 5 s
	var ns []*node
	for _, id := range []string{"n1", "n2"} {
		home := filepath.Join(base, id)
		os.MkdirAll(home, 0o700)
		os.WriteFile(filepath.Join(home, "paddock.toml"), []byte(fmt.Sprintf("[tracing]\notlp_endpoint = %q\n", srv.URL+"/v1/traces")), 0o600)
		ns = append(ns, startNode(t, base, id, url))
	}
	repo := newRepo(t, filepath.Join(base, "src", "app"), 3)
	cli(t, ns[0].home, "project", "add", repo).must(t)
	id := strings.TrimSpace(cli(t, ns[0].home, "create", "-p", "app").must(t).out)
	holder, via := ns[0], ns[1]
	if runState(t, ns[0].home, id).Node == "n2" {
		holder, via = ns[1], ns[0]
	}

	// The orchestrator's span: trace T, span O.
	tid, _ := hex.DecodeString("4bf92f3577b34da6a3ce929d0e0e4736")
	oid, _ := hex.DecodeString("00f067aa0ba902b7")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(via.home, "paddock.sock"))
	}}}
	req, _ := http.NewRequest("POST", "http://paddock/v1/runs/"+id+"/exec", strings.NewReader(`{"argv":["sh","-c","echo traced"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+hex.EncodeToString(tid)+"-"+hex.EncodeToString(oid)+"-01")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "traced") {
		t.Fatalf("exec through %s: %d %s", via.id, resp.StatusCode, body)
	}

	const route = "POST /v1/runs/{id}/exec"
	// On the node called: under the orchestrator's span; on the node that
	// holds the run: under the first node's (whichever arrives first).
	first := recv.child(t, tid, route, oid)
	second := recv.child(t, tid, route, first.span.SpanId)
	if first.instance == "" || second.instance == "" {
		t.Fatalf("spans without their node's instance: %q on %s, %q on %s", first.instance, via.id, second.instance, holder.id)
	}
	if first.instance == second.instance || first.instance == "" {
		t.Errorf("both server spans come from one process (%q, %q)", first.instance, second.instance)
	}
	if attr(second.span, "paddock.run_id") != id {
		t.Errorf("the holding node's span names run %q, want %s", attr(second.span, "paddock.run_id"), id)
	}
	tool := recv.find(t, tid, "tool exec")
	if string(tool.span.ParentSpanId) != string(second.span.SpanId) || tool.instance != second.instance {
		t.Errorf("the tool call's span is not the holding node's server span's child")
	}
	if attr(tool.span, "paddock.run_id") != id || attr(tool.span, "paddock.project") != "app" || attr(tool.span, "paddock.decision") != "allow" {
		t.Errorf("tool span attributes: %v", tool.span.Attributes)
	}
	ex := recv.find(t, tid, "exec")
	if string(ex.span.ParentSpanId) != string(tool.span.SpanId) || attr(ex.span, "paddock.exit_code") != "0" || attr(ex.span, "paddock.sandbox_mode") == "" {
		t.Errorf("exec span: parent %x (want %x), attributes %v", ex.span.ParentSpanId, tool.span.SpanId, ex.span.Attributes)
	}
}
