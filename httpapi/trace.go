package httpapi

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator reads and writes the W3C trace context (traceparent,
// tracestate) of a request.
var propagator = propagation.TraceContext{}

// traced starts each request's server span (Server.Tracer), a child of
// the caller's own when its request carries a W3C traceparent (an
// orchestrator's trace of its agent loop, or the node that forwarded the
// call), named by the route's pattern; the calls the request makes get it
// in their context. An agent's request (agents: its run's own socket, or
// a run's token) is not a child: an agent may not choose what is sampled
// nor put paddock's spans in a trace of its choosing; its span is a root,
// linked to the caller's. Without a Tracer it is next.
func (s *Server) traced(next http.Handler, from callers) http.Handler {
	if s.Tracer == nil {
		return next
	}
	patterns := http.NewServeMux()
	for _, rt := range Routes() {
		patterns.Handle(rt.Method+" "+rt.Path, next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		_, pattern := patterns.Handler(r)
		name := pattern
		if name == "" {
			name = r.Method // no route: no path in the name (cardinality)
		}
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", pattern))}
		if from == agentsOnly || (from == anyCaller && strings.HasPrefix(r.Header.Get("Authorization"), "Bearer pdk_run_")) {
			opts = append(opts, trace.WithNewRoot())
			if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			}
		}
		ctx, span := s.Tracer.Start(ctx, name, opts...)
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		code := sw.status
		if code == 0 {
			code = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}

// callers says who calls a listener, for traced.
type callers uint8

const (
	anyCaller  callers = iota // the operator or a run's token
	agentsOnly                // a run's own socket
	nodesOnly                 // the node listener: the forwarding node's span is the parent
)

// spanRun names the run a route is called on in the request's span.
func spanRun(r *http.Request) {
	if id := r.PathValue("id"); id != "" {
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("paddock.run_id", id))
	}
}
