package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracingWanted reports whether the environment asks for traces. The SDK's
// own default exporter is OTLP; here nothing set means no traces at all,
// so a server nobody configured for OpenTelemetry pays nothing for it.
// Traces are on when OTEL_TRACES_EXPORTER names an exporter other than
// "none", or when it is unset and an OTLP endpoint is given.
func tracingWanted(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	case "none":
		return false
	default:
		return true
	}
}

// newTracing returns the tracer provider the OTEL_* environment asks for,
// through the contrib autoexport package (otlp, console, none), and the
// function that flushes and stops it; a nil provider when traces are off.
// The service is named toolgate unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) names it otherwise.
func newTracing(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	if !tracingWanted(os.Getenv) {
		return nil, off, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, off, fmt.Errorf("trace exporter: %w", err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, off, nil
	}
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, off, fmt.Errorf("trace resource: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("toolgate")), env)
	if err != nil {
		return nil, off, fmt.Errorf("trace resource: %w", err)
	}
	// The SDK reads OTEL_TRACES_SAMPLER and OTEL_BSP_* itself.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
