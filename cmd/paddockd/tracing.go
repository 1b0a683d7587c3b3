package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/paddock-dev/paddock/internal/paddockcli"
)

// tracingConfig is paddock.toml's [tracing]: spans exported over OTLP
// (HTTP, protobuf), off unless an endpoint is set here or in the
// standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT.
type tracingConfig struct {
	// OTLPEndpoint is the collector's traces URL, such as
	// "http://127.0.0.1:4318/v1/traces" (an http:// one is sent in the
	// clear: keep it on loopback or a private network).
	OTLPEndpoint string `toml:"otlp_endpoint"`
	// SampleRatio is the fraction of traces begun here that are kept
	// (default 1); a call under a caller's sampled trace is always kept,
	// one under its unsampled trace never.
	SampleRatio *float64 `toml:"sample_ratio"`
}

func (c tracingConfig) check() error {
	if c.OTLPEndpoint != "" {
		u, err := url.Parse(c.OTLPEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("tracing.otlp_endpoint %q: want an http:// or https:// URL such as http://127.0.0.1:4318/v1/traces", c.OTLPEndpoint)
		}
	}
	if r := c.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		return fmt.Errorf("tracing.sample_ratio %v: want a fraction from 0 to 1", *r)
	}
	return nil
}

// startTracing makes the daemon's tracer, or none (nil) when no endpoint
// is set; stop flushes what is left and ends it.
func startTracing(ctx context.Context, c tracingConfig, getenv func(string) string) (tr trace.Tracer, stop func(), err error) {
	var opts []otlptracehttp.Option
	switch {
	case c.OTLPEndpoint != "":
		opts = append(opts, otlptracehttp.WithEndpointURL(c.OTLPEndpoint))
	case getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		// The exporter reads them itself.
	default:
		return nil, func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	host, _ := os.Hostname()
	res := resource.NewSchemaless(attribute.String("service.name", "paddock"),
		attribute.String("service.version", paddockcli.VersionString()),
		attribute.String("service.instance.id", fmt.Sprintf("%s/%d", host, os.Getpid())))
	ratio := 1.0
	if c.SampleRatio != nil {
		ratio = *c.SampleRatio
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
	return tp.Tracer("github.com/paddock-dev/paddock"), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintln(os.Stderr, "paddock: tracing: the last spans were not exported:", err)
		}
	}, nil
}
