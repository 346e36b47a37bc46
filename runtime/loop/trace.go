package loop

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/model"
)

// One trace per run of a turn: a root span for the run, a child for each
// model call and each tool call. Spans carry ids, names of models and
// tools, counts and outcomes; never what people or the model wrote, nor a
// tool's arguments or results (Config.TraceSizes adds their sizes).

const tracerName = "github.com/toolgate/toolgate/runtime/loop"

// Attributes of toolgate's own, beside the OpenTelemetry conventions.
const (
	attrTurnID         = attribute.Key("toolgate.turn.id")
	attrConversationID = attribute.Key("toolgate.conversation.id")
	attrTurnStatus     = attribute.Key("toolgate.turn.status")
	attrStep           = attribute.Key("toolgate.step")
	attrCost           = attribute.Key("toolgate.cost_usd")
	attrToolCallID     = attribute.Key("toolgate.tool_call.id")
	attrOutcome        = attribute.Key("toolgate.tool.outcome")
	attrAttempts       = attribute.Key("toolgate.tool.attempts")
	attrArgumentsBytes = attribute.Key("toolgate.tool.arguments_bytes")
	attrResultBytes    = attribute.Key("toolgate.tool.result_bytes")
	attrRequestChars   = attribute.Key("toolgate.model.request_chars")
	attrResponseChars  = attribute.Key("toolgate.model.response_chars")
	attrToolCalls      = attribute.Key("toolgate.model.tool_calls")
)

// untraced is the span of an untraced run: it records nothing, and ending
// it ends nothing.
var untraced = trace.SpanFromContext(context.Background())

// startRun starts the root span of a run of the turn: a trace of its own.
func (r *Runner) startRun(ctx context.Context, turnID int) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, untraced
	}
	return r.tracer.Start(ctx, "turn", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrTurnID.String(r.apiID(turnID))))
}

// traceRun completes the run's root span once the turn is loaded: its
// conversation, and a link to the trace of the run it resumes. The run's
// own span context is kept on the turn for the run after it.
func (t *turnRun) traceRun(ctx context.Context) error {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	span.SetAttributes(attrConversationID.String(t.r.apiID(t.conv.ID)))
	if prev := t.turn.TraceParent; prev != nil {
		carrier := propagation.MapCarrier{"traceparent": *prev}
		if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier)); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("toolgate.link", "resumes")}})
		}
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if err := t.db.SetTraceParent(ctx, carrier.Get("traceparent")); err != nil {
		return fmt.Errorf("record the run's trace: %w", err)
	}
	return nil
}

// endRun ends the root span with how the run ended.
func endRun(span trace.Span, err error, stopped bool) {
	if span.IsRecording() {
		switch {
		case stopped:
			span.SetAttributes(attribute.Bool("toolgate.turn.left_running", true))
		case err != nil:
			span.SetStatus(codes.Error, "the run failed")
		}
	}
	span.End()
}

// startModelCall starts the span of one model call.
func (t *turnRun) startModelCall(ctx context.Context, step int) (context.Context, trace.Span) {
	if t.r.tracer == nil {
		return ctx, untraced
	}
	provider := t.r.cfg.Provider.Name()
	name := "chat " + provider
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(provider), attrStep.Int(step),
	}
	if t.req.Model != "" {
		name = "chat " + t.req.Model
		attrs = append(attrs, semconv.GenAIRequestModel(t.req.Model))
	}
	if t.r.cfg.TraceSizes {
		attrs = append(attrs, attrRequestChars.Int(requestChars(t.req)))
	}
	return t.r.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endModelCall ends a model call's span with the model that answered,
// its tokens and its cost.
func (t *turnRun) endModelCall(span trace.Span, resp *model.Response, name string, cost schematype.Micros, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "the model call failed")
		span.End()
		return
	}
	span.SetAttributes(
		semconv.GenAIResponseModel(name),
		semconv.GenAIUsageInputTokens(int(resp.Usage.InputUncached+resp.Usage.CacheRead+resp.Usage.CacheWrite)),
		semconv.GenAIUsageOutputTokens(int(resp.Usage.Output)),
		semconv.GenAIUsageCacheReadInputTokens(int(resp.Usage.CacheRead)),
		semconv.GenAIUsageCacheCreationInputTokens(int(resp.Usage.CacheWrite)),
		attrCost.Float64(cost.USD()),
		attrToolCalls.Int(len(resp.ToolCalls)),
	)
	if t.r.cfg.TraceSizes {
		span.SetAttributes(attrResponseChars.Int(len(resp.Text)))
	}
	span.End()
}

// requestChars is the size of a request's messages, in characters.
func requestChars(req model.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	return n
}

// startToolCall starts the span of one tool call. A name the turn was not
// offered is named "unknown": the model may write anything there.
func (t *turnRun) startToolCall(ctx context.Context, row *ent.ToolCall) (context.Context, trace.Span) {
	if t.r.tracer == nil {
		return ctx, untraced
	}
	name := row.Name
	if _, ok := t.byName[name]; !ok {
		name = "unknown"
	}
	return t.r.tracer.Start(ctx, "execute_tool "+name, trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(name),
		attrToolCallID.String(t.r.apiID(row.ID)), attrStep.Int(row.Step)))
}

// traceToolCall records a tool call's outcome and attempts on its span.
func (t *turnRun) traceToolCall(ctx context.Context, res dispatch.Result) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutcome.String(string(res.Outcome)), attrAttempts.Int(res.Attempts))
	if !res.Outcome.Succeeded() {
		span.SetStatus(codes.Error, string(res.Outcome))
	}
	if t.r.cfg.TraceSizes {
		span.SetAttributes(attrArgumentsBytes.Int(len(res.Arguments)), attrResultBytes.Int(len(res.Content)))
	}
}

// setTurnStatus records the status a run left the turn in.
func setTurnStatus(span trace.Span, status string) {
	if span != nil && span.IsRecording() {
		span.SetAttributes(attrTurnStatus.String(status))
	}
}
