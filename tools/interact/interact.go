// Package interact holds the tools that talk to the person rather than
// fetch anything: clarify (a question the turn waits on, carried out by
// the runtime) and suggest_next_actions (follow-ups stored on the turn).
package interact

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/turn"
)

// Limits of the family. Clarify's are the pause contract's
// (tools.MaxClarifyOptions and the rest): the runtime carries it out.
const (
	// MaxSuggestions is how many follow-ups one call may store.
	MaxSuggestions = 5
	// MaxSuggestionChars bounds each follow-up.
	MaxSuggestionChars = 200
)

// ErrNoTurn is returned when suggestions have no turn to go on.
var ErrNoTurn = errors.New("the conversation has no turn yet")

// CheckSuggestions trims suggestions, drops repeats, and refuses an empty
// list, an empty suggestion, more than MaxSuggestions, or one longer than
// MaxSuggestionChars. Its errors are worded for the caller.
func CheckSuggestions(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("suggestions: give 1 to %d", MaxSuggestions)
	}
	if len(in) > MaxSuggestions {
		return nil, fmt.Errorf("suggestions: at most %d, got %d", MaxSuggestions, len(in))
	}
	out := make([]string, 0, len(in))
	for i, s := range in {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return nil, fmt.Errorf("suggestions[%d]: empty", i)
		case utf8.RuneCountInString(s) > MaxSuggestionChars:
			return nil, fmt.Errorf("suggestions[%d]: at most %d characters", i, MaxSuggestionChars)
		case !slices.Contains(out, s):
			out = append(out, s)
		}
	}
	return out, nil
}

// SaveSuggestions stores checked suggestions on a turn of the
// conversation, replacing what it had: turnID, or the latest turn when
// turnID is 0. Client must reach the conversation's turns (the API's
// scoped client finds the latest turn only in scope).
// It returns the id of the turn that took them.
func SaveSuggestions(ctx context.Context, client *ent.Client, conversationID, turnID int, suggestions []string) (int, error) {
	if turnID == 0 {
		id, err := client.Turn.Query().
			Where(turn.ConversationID(conversationID)).
			Order(ent.Desc(turn.FieldNumber)).
			FirstID(ctx)
		if ent.IsNotFound(err) {
			return 0, ErrNoTurn
		}
		if err != nil {
			return 0, fmt.Errorf("find latest turn: %w", err)
		}
		turnID = id
	}
	n, err := client.Turn.Update().
		Where(turn.ID(turnID), turn.ConversationID(conversationID)).
		SetSuggestions(suggestions).
		Save(ctx)
	if err != nil {
		return 0, fmt.Errorf("save suggestions: %w", err)
	}
	if n == 0 {
		return 0, ErrNoTurn
	}
	return turnID, nil
}
