package mcp

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/toolgate/toolgate/runtime/mcp"

// startCall starts the client span of a tool call to an application's
// server, when the call is traced. The span names the method and the
// tool, never the arguments or the result.
func startCall(ctx context.Context, app Application, tool string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", "tools/call"),
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(tool),
		attribute.String("toolgate.application", app.Name),
	}
	if u, err := url.Parse(app.URL); err == nil {
		attrs = append(attrs, semconv.ServerAddress(u.Hostname()))
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, "tools/call "+tool,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endCall ends a call's span with whether an answer came back, and
// whether the tool reported a failure.
func endCall(span trace.Span, res Result, err error) {
	if !span.IsRecording() {
		return
	}
	switch {
	case err != nil:
		span.SetStatus(codes.Error, "no answer")
	case res.IsError:
		span.SetStatus(codes.Error, "the tool reported a failure")
	}
	span.End()
}

// withTraceParent adds the W3C traceparent of a traced request's context
// to a copy of the request, for servers that continue the trace.
func withTraceParent(req *http.Request) *http.Request {
	sc := trace.SpanContextFromContext(req.Context())
	if !sc.IsValid() {
		return req
	}
	req = req.Clone(req.Context())
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return req
}
