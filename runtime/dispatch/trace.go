package dispatch

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceTransport sends a tool call's request in an HTTP client span, with
// the W3C traceparent header, when the call is traced: the resolver's
// spans then sit under the call's. Untraced, the request goes out as it
// is, at no cost.
type traceTransport struct {
	base   http.RoundTripper
	traced http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanFromContext(req.Context()).IsRecording() {
		return t.base.RoundTrip(req)
	}
	return t.traced.RoundTrip(req)
}

// traceClient returns c with its transport traced; the spans take the
// tracer provider of the call's span.
func traceClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := base.(traceTransport); ok {
		return c
	}
	traced := *c
	traced.Transport = traceTransport{base: base,
		traced: otelhttp.NewTransport(base, otelhttp.WithPropagators(propagation.TraceContext{}))}
	return &traced
}
