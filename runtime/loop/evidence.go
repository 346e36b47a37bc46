package loop

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
)

// windowsShown keeps the spans of a window read (a tool whose evidence is
// tools.EvidenceWindows) that show results which are evidence themselves:
// a span counts when the call that stored its ref counted what the model
// saw of that ref, as its own evidence records. A skill's instructions, a
// listing, an acknowledgement, what a failed call was told and a call's
// saved arguments (which no call stores as its result) counted for
// nothing when they were stored, so a window of them counts for nothing
// either. One statement, whatever the spans.
func (t *turnRun) windowsShown(ctx context.Context, spans []schematype.Span) ([]schematype.Span, error) {
	if len(spans) == 0 {
		return nil, nil
	}
	var refs []string
	for _, s := range spans {
		if !slices.Contains(refs, s.Ref) {
			refs = append(refs, s.Ref)
		}
	}
	sources, err := t.client().ToolCall.Query().
		Where(toolcall.HasResultWith(storedresult.ConversationID(t.conv.ID), storedresult.RefIn(refs...))).
		Select(toolcall.FieldRef, toolcall.FieldEvidence).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load evidence sources: %w", err)
	}
	evidence := map[string]bool{}
	for _, c := range sources {
		if c.Ref != nil && slices.ContainsFunc(c.Evidence, func(s schematype.Span) bool { return s.Ref == *c.Ref }) {
			evidence[*c.Ref] = true
		}
	}
	var out []schematype.Span
	for _, s := range spans {
		if evidence[s.Ref] {
			out = append(out, s)
		}
	}
	return out, nil
}
