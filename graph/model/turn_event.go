package model

import (
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/runtime/events"
)

// TurnEvent is one event of a turn, carrying the turn's state as of that
// event.
type TurnEvent struct {
	// Kind is what happened.
	Kind events.Kind `json:"kind"`
	// Of is the turn as of the event (the turn field).
	Of *ent.Turn `json:"-"`
	// ToolCall is the tool call, for tool call events.
	ToolCall *ent.ToolCall `json:"toolCall,omitempty"`
	// At is when it happened.
	At time.Time `json:"at"`
	// Seq is the event's place in the turn.
	Seq string `json:"seq"`
	// Step is the model call the event belongs to.
	Step int `json:"step"`
	// Delta is a TEXT_DELTA's text.
	Delta *TextDelta `json:"delta,omitempty"`
	// Writing is a TOOL_CALL_WRITING's call.
	Writing *events.Writing `json:"writing,omitempty"`
	// Err, when set, ends the stream with it instead of the event: the
	// last thing a subscriber that fell too far behind reads.
	Err error `json:"-"`
}

// Turn is the turn as of the event; Err, on the event that ends a stream
// early.
func (e *TurnEvent) Turn() (*ent.Turn, error) {
	if e.Err != nil {
		return nil, e.Err
	}
	return e.Of, nil
}
