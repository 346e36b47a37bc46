package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
)

// WindowsShown keeps the spans of a window read (a tool whose evidence is
// tools.EvidenceWindows) that show results which are evidence themselves:
// a span counts when the call that stored its ref counted what the model
// saw of that ref, as its own evidence records. A skill's instructions, a
// listing, an acknowledgement, what a failed call was told and a call's
// saved arguments (which no call stores as its result) counted for
// nothing when they were stored, so a window of them counts for nothing
// either. One statement, whatever the spans.
func (s *Store) WindowsShown(ctx context.Context, conversationID int, spans []schematype.Span) ([]schematype.Span, error) {
	if len(spans) == 0 {
		return nil, nil
	}
	var refs []string
	for _, sp := range spans {
		if !slices.Contains(refs, sp.Ref) {
			refs = append(refs, sp.Ref)
		}
	}
	sources, err := s.client.ToolCall.Query().
		Where(toolcall.HasResultWith(storedresult.ConversationID(conversationID), storedresult.RefIn(refs...))).
		Select(toolcall.FieldRef, toolcall.FieldEvidence).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load evidence sources: %w", err)
	}
	evidence := map[string]bool{}
	for _, c := range sources {
		if c.Ref != nil && slices.ContainsFunc(c.Evidence, func(sp schematype.Span) bool { return sp.Ref == *c.Ref }) {
			evidence[*c.Ref] = true
		}
	}
	var out []schematype.Span
	for _, sp := range spans {
		if evidence[sp.Ref] {
			out = append(out, sp)
		}
	}
	return out, nil
}
