package graph

import (
	"context"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/toolgate/toolgate/graph"

// traceHTTP gives every request a server span, continuing the trace its
// W3C traceparent names (a tool call of the runtime sends one). Health
// checks, metrics scrapes and websockets, which live as long as their
// subscriptions, are left out.
func traceHTTP(tp trace.TracerProvider, next http.Handler) http.Handler {
	return otelhttp.NewHandler(next, "toolgate",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithFilter(func(r *http.Request) bool {
			switch r.URL.Path {
			case "/healthz", "/readyz", "/metrics":
				return false
			}
			return !strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
		}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.URL.Path == "/graphql" || strings.HasPrefix(r.URL.Path, "/playground") {
				return r.Method + " " + r.URL.Path
			}
			return r.Method
		}))
}

// tracing is the gqlgen extension that gives each operation a span named
// by its type and name, and each root field (a resolver) a child span:
// the SQL a resolver sends sits under its field. The variables and the
// document are never recorded; they hold what people wrote.
type tracing struct{ tracer trace.Tracer }

var (
	_ graphql.HandlerExtension     = tracing{}
	_ graphql.ResponseInterceptor  = tracing{}
	_ graphql.RootFieldInterceptor = tracing{}
)

// ExtensionName names the extension.
func (tracing) ExtensionName() string { return "Tracing" }

// Validate accepts any schema.
func (tracing) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse wraps a query's or a mutation's response in a span;
// a subscription's events are not traced.
func (t tracing) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	if !graphql.HasOperationContext(ctx) {
		return next(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation == ast.Subscription {
		return next(ctx)
	}
	kind := string(oc.Operation.Operation)
	name, attrs := kind, []attribute.KeyValue{attribute.String("graphql.operation.type", kind)}
	if oc.OperationName != "" {
		name += " " + oc.OperationName
		attrs = append(attrs, attribute.String("graphql.operation.name", oc.OperationName))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	defer span.End()
	resp := next(ctx)
	if resp != nil && len(resp.Errors) > 0 {
		span.SetStatus(codes.Error, "")
		span.SetAttributes(attribute.Int("graphql.errors", len(resp.Errors)))
		if code, ok := resp.Errors[0].Extensions["code"].(string); ok {
			span.SetAttributes(attribute.String("graphql.error.code", code))
		}
	}
	return resp
}

// InterceptRootField wraps a root field's resolver in a span.
func (t tracing) InterceptRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	fc := graphql.GetRootFieldContext(ctx)
	if fc == nil || fc.Field.Field == nil {
		return next(ctx)
	}
	parent := fc.Object
	if def := fc.Field.ObjectDefinition; def != nil {
		parent = def.Name
	}
	ctx, span := t.tracer.Start(ctx, parent+"."+fc.Field.Name, trace.WithAttributes(
		attribute.String("graphql.field.name", fc.Field.Name), attribute.String("graphql.field.parent", parent)))
	defer span.End()
	return next(ctx)
}
