package loop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// spans is what an in-memory exporter holds, with the questions the tests
// ask of a trace.
type spans tracetest.SpanStubs

// named returns the spans of the trace called name.
func (ss spans) named(tr trace.TraceID, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range ss {
		if s.SpanContext.TraceID() == tr && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// children returns the spans whose parent is p.
func (ss spans) children(p tracetest.SpanStub) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range ss {
		if s.Parent.SpanID() == p.SpanContext.SpanID() && s.Parent.TraceID() == p.SpanContext.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

// child returns the one child of p whose name starts with prefix.
func (ss spans) child(t *testing.T, p tracetest.SpanStub, prefix string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	var names []string
	for _, c := range ss.children(p) {
		names = append(names, c.Name)
		if strings.HasPrefix(c.Name, prefix) {
			found = append(found, c)
		}
	}
	require.Len(t, found, 1, "one child of %q named %q* among %v", p.Name, prefix, names)
	return found[0]
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A turn with one resolver tool and one application tool is one trace: the
// turn's span holds its model calls and tool calls; the resolver tool's
// GraphQL request carries the trace over HTTP, so the API's server span,
// the operation, the resolver and its SQL sit under the tool call; the
// application's call is a client span under its own. No span holds what
// the user wrote, the arguments or the results.
func TestOneTracePerTurn(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{
				call("r", "read_transcript", `{"words": "quarterly tides"}`),
				call("a", "crm__lookup", `{"name": "Ada"}`),
			}, Usage: model.Usage{InputUncached: 1200, CacheRead: 300, Output: 40}},
			{Text: "Her address is ada@example.com.", Usage: model.Usage{InputUncached: 1300, Output: 12}},
		}}
		h := newHarness(t, d, p, withTracer(tp))
		h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "crm", url: $u, allowedTools: ["lookup"]}) { id } }`,
			map[string]any{"u": crm(t)})
		conv := h.conversation(t, "crm__lookup")
		const said = "Where does Ada Lovelace live, privately?"
		id := h.send(t, conv, said, "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

		system := "sqlite"
		if d.Dialect == "postgres" {
			system = "postgresql"
		}
		var ss spans
		var root tracetest.SpanStub
		// The API's spans end as its answers are written: a moment after
		// the runtime has read them.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ss = spans(exp.GetSpans())
			var roots []tracetest.SpanStub
			for _, s := range ss {
				if s.Name == "turn" && attr(s, "toolgate.turn.id").AsString() == id {
					roots = append(roots, s)
				}
			}
			require.Len(c, roots, 1)
			root = roots[0]
			require.Len(c, ss.named(root.SpanContext.TraceID(), "POST /graphql"), 1)
		}, 10*time.Second, 10*time.Millisecond)
		tr := root.SpanContext.TraceID()
		require.False(t, root.Parent.IsValid(), "the run is a trace of its own")
		require.Equal(t, conv, attr(root, "toolgate.conversation.id").AsString())
		require.Equal(t, "COMPLETED", attr(root, "toolgate.turn.status").AsString())

		models := ss.named(tr, "chat scripted")
		require.Len(t, models, 2)
		for _, m := range models {
			require.Equal(t, root.SpanContext.SpanID(), m.Parent.SpanID())
			require.Equal(t, trace.SpanKindClient, m.SpanKind)
			require.Equal(t, "gpt-4.1", attr(m, "gen_ai.response.model").AsString())
		}
		first := models[0]
		if attr(first, "toolgate.step").AsInt64() != 0 {
			first = models[1]
		}
		require.Equal(t, int64(1500), attr(first, "gen_ai.usage.input_tokens").AsInt64())
		require.Equal(t, int64(300), attr(first, "gen_ai.usage.cache_read.input_tokens").AsInt64())
		require.Equal(t, int64(40), attr(first, "gen_ai.usage.output_tokens").AsInt64())
		require.Greater(t, attr(first, "toolgate.cost_usd").AsFloat64(), 0.0)

		// The resolver tool: tool call → HTTP client → API server →
		// operation → resolver → SQL.
		tool := ss.child(t, root, "execute_tool read_transcript")
		require.Equal(t, "read_transcript", attr(tool, "gen_ai.tool.name").AsString())
		require.NotEmpty(t, attr(tool, "toolgate.tool.outcome").AsString())
		require.Equal(t, int64(1), attr(tool, "toolgate.tool.attempts").AsInt64())
		client := ss.child(t, tool, "HTTP POST")
		require.Equal(t, trace.SpanKindClient, client.SpanKind)
		server := ss.child(t, client, "POST /graphql")
		require.Equal(t, trace.SpanKindServer, server.SpanKind)
		op := ss.child(t, server, "query")
		require.Equal(t, "query", attr(op, "graphql.operation.type").AsString())
		resolver := ss.child(t, op, "Query.")
		var sql []tracetest.SpanStub
		for _, s := range ss.children(resolver) {
			if attr(s, "db.system.name").AsString() == system {
				sql = append(sql, s)
			}
		}
		require.NotEmpty(t, sql, "the resolver's statements sit under it")
		require.Regexp(t, `^(SELECT|INSERT|UPDATE|DELETE)`, sql[0].Name)

		// The application tool: a client span under its tool call.
		app := ss.child(t, root, "execute_tool crm__lookup")
		require.Equal(t, "HITS", attr(app, "toolgate.tool.outcome").AsString())
		mcpCall := ss.child(t, app, "tools/call lookup")
		require.Equal(t, trace.SpanKindClient, mcpCall.SpanKind)
		require.Equal(t, "tools/call", attr(mcpCall, "mcp.method.name").AsString())

		// The runtime's own statements (loading the turn, recording the
		// steps) sit in the same trace.
		var own int
		for _, s := range ss.children(root) {
			if attr(s, "db.system.name").AsString() == system {
				own++
			}
		}
		require.Positive(t, own)

		// Nothing anyone wrote: not the user's text, the arguments, the
		// results nor the answer.
		for _, s := range ss {
			for _, kv := range s.Attributes {
				v := kv.Value.String()
				for _, secret := range []string{said, "Ada", "quarterly", "ada@example.com", "Her address"} {
					require.NotContains(t, v, secret, "span %q attribute %s", s.Name, kv.Key)
				}
			}
		}
	})
}

// A run that resumes a turn (here after a clarification; after a restart
// alike) is a trace of its own that links to the trace of the run before.
func TestResumedRunLinksToTheRunBefore(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	p := &scripted{answers: []model.Response{
		{ToolCalls: []model.ToolCall{call("q1", "clarify", `{"question": "Which year?", "options": ["2025", "2026"]}`)}},
		{Text: "Then 2026 it is."},
	}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p, withTracer(tp))
	id := h.send(t, h.conversation(t), "Plan the budget", "")
	require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, h.wait(t, id).Status)
	h.gql(t, `mutation($t: ID!) { answerClarification(input: {turnId: $t, answer: "2026"}) { id } }`, map[string]any{"t": id})
	require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)

	var runs []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "turn" && attr(s, "toolgate.turn.id").AsString() == id {
			runs = append(runs, s)
		}
	}
	require.Len(t, runs, 2)
	require.Equal(t, "WAITING_FOR_CLARIFICATION", attr(runs[0], "toolgate.turn.status").AsString())
	require.Empty(t, runs[0].Links)
	require.NotEqual(t, runs[0].SpanContext.TraceID(), runs[1].SpanContext.TraceID())
	require.Len(t, runs[1].Links, 1)
	require.Equal(t, runs[0].SpanContext.TraceID(), runs[1].Links[0].SpanContext.TraceID())
	require.Equal(t, runs[0].SpanContext.SpanID(), runs[1].Links[0].SpanContext.SpanID())
}

// BenchmarkTurnTracing runs turns of two model calls with one resolver
// tool call between (as BenchmarkResolverToolCall), untraced (no tracer
// provider, as a server with no OTEL_* variable runs) and traced into a
// batching exporter that drops what it gets: the difference is what a
// traced turn costs; untraced, the runtime's hooks only ask whether the
// context is traced.
func BenchmarkTurnTracing(b *testing.B) {
	for _, bb := range []struct {
		name   string
		traced bool
	}{{"off", false}, {"on", true}} {
		b.Run(bb.name, func(b *testing.B) {
			p := &scriptedCycle{answers: []model.Response{
				{ToolCalls: []model.ToolCall{call("c1", "calculator", `{"expression": "1+1"}`)}},
				{Text: "done"},
			}}
			var opts []option
			var exp *tracetest.InMemoryExporter
			if bb.traced {
				exp = tracetest.NewInMemoryExporter()
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts = append(opts, withTracer(tp))
			}
			h := newHarness(b, dbtest.Open(b, dbtest.SQLite), p, opts...)
			b.ReportAllocs()
			runTurns(b, h, h.conversation(b))
			if exp != nil {
				b.StopTimer()
				b.ReportMetric(float64(len(exp.GetSpans()))/float64(b.N), "spans/turn")
				exp.Reset()
			}
		})
	}
}
