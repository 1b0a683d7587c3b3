package lifecycle

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paddock-dev/paddock"
)

// Attributes a span of a run carries.
const (
	attrRun     = attribute.Key("paddock.run_id")
	attrProject = attribute.Key("paddock.project")
	attrAgent   = attribute.Key("paddock.agent")
)

// span starts a span of the daemon's tracer (Config.Tracer; none: a span
// that records nothing) under ctx's, for run r (nil: none) with its run,
// project and agent as attributes. end ends it with err's status.
func (kn *kernel) span(ctx context.Context, name string, r *paddock.Run, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	tr := kn.Tracer
	if tr == nil {
		tr = noop.Tracer{}
	}
	if r != nil {
		attrs = append(attrs, attrRun.String(r.ID), attrProject.String(r.Project))
		if r.Agent != nil {
			attrs = append(attrs, attrAgent.String(r.Agent.Name))
		}
	}
	ctx, sp := tr.Start(ctx, name, trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			// The code only: an error's text can quote an agent's command
			// line or a path, which the events mask and a collector
			// elsewhere must not get.
			code := string(paddock.ErrorCode(err))
			sp.SetStatus(codes.Error, code)
			sp.SetAttributes(attribute.String("paddock.error_code", code))
		}
		sp.End()
	}
}
