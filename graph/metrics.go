package graph

import (
	"context"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"
)

// metrics records HTTP request and GraphQL operation durations.
type metrics struct {
	requests   *prometheus.HistogramVec
	operations *prometheus.HistogramVec
}

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_http_request_duration_seconds",
			Help:    "HTTP request durations by handler, method and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"handler", "method", "code"}),
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_graphql_operation_duration_seconds",
			Help:    "GraphQL operation durations by operation type and first root field, and whether it answered errors.",
			Buckets: prometheus.DefBuckets,
		}, []string{"type", "field", "errors"}),
	}
	reg.MustRegister(m.requests, m.operations)
	return m
}

func (m *metrics) http(name string, next http.Handler) http.Handler {
	return promhttp.InstrumentHandlerDuration(m.requests.MustCurryWith(prometheus.Labels{"handler": name}), next)
}

// ExtensionName names the extension.
func (m *metrics) ExtensionName() string { return "Metrics" }

// Validate has nothing to check.
func (m *metrics) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse times the response of each query and mutation. A
// subscription's events are not operations: each is an event of one
// subscription, and counting them would swamp the operations.
func (m *metrics) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	start := time.Now()
	resp := next(ctx)
	if !graphql.HasOperationContext(ctx) {
		return resp
	}
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation != nil && oc.Operation.Operation == ast.Subscription {
		return resp
	}
	// Label by the first root field, not the client's operation name: the
	// schema bounds the first, nothing bounds the second.
	typ, name := "unknown", "none"
	if op := oc.Operation; op != nil {
		typ = string(op.Operation)
		for _, sel := range op.SelectionSet {
			if f, ok := sel.(*ast.Field); ok {
				name = f.Name
				break
			}
		}
	}
	hasErrors := "false"
	if resp != nil && len(resp.Errors) > 0 {
		hasErrors = "true"
	}
	m.operations.WithLabelValues(typ, name, hasErrors).Observe(time.Since(start).Seconds())
	return resp
}
