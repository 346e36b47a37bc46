// Package interact holds the tools that talk to the person rather than
// fetch anything: clarify (a question the turn waits on, carried out by
// the runtime) and suggest_next_actions (follow-ups stored on the turn).
package interact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/turn"
)

// Limits of the family.
const (
	// MaxOptions is how many options a clarification may offer.
	MaxOptions = 6
	// MaxOptionChars bounds each option.
	MaxOptionChars = 200
	// MaxQuestionChars bounds the question.
	MaxQuestionChars = 1_000
	// MaxSuggestions is how many follow-ups one call may store.
	MaxSuggestions = 5
	// MaxSuggestionChars bounds each follow-up.
	MaxSuggestionChars = 200
)

// ErrNoTurn is returned when suggestions have no turn to go on.
var ErrNoTurn = errors.New("the conversation has no turn yet")

// Clarification is a validated clarify call.
type Clarification struct {
	Question string   `json:"question"`
	Options  []string `json:"options"`
	// Recommended is one of Options, or nil.
	Recommended *string `json:"recommended,omitempty"`
}

// ParseClarify reads and checks clarify's arguments: one question, at most
// MaxOptions distinct options, and at most one recommendation, which must
// be one of the options. Its errors are worded for the model.
func ParseClarify(args json.RawMessage) (Clarification, error) {
	var in struct {
		Question    *string         `json:"question"`
		Options     []string        `json:"options"`
		Recommended json.RawMessage `json:"recommended"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Clarification{}, fmt.Errorf("read clarify arguments: %w", err)
	}
	var c Clarification
	if in.Question == nil || strings.TrimSpace(*in.Question) == "" {
		return c, errors.New("question: ask one question")
	}
	c.Question = strings.TrimSpace(*in.Question)
	if n := utf8.RuneCountInString(c.Question); n > MaxQuestionChars {
		return c, fmt.Errorf("question: at most %d characters, got %d", MaxQuestionChars, n)
	}
	if len(in.Options) > MaxOptions {
		return c, fmt.Errorf("options: at most %d, got %d", MaxOptions, len(in.Options))
	}
	c.Options = make([]string, 0, len(in.Options))
	for i, o := range in.Options {
		o = strings.TrimSpace(o)
		switch {
		case o == "":
			return c, fmt.Errorf("options[%d]: empty", i)
		case utf8.RuneCountInString(o) > MaxOptionChars:
			return c, fmt.Errorf("options[%d]: at most %d characters", i, MaxOptionChars)
		case slices.Contains(c.Options, o):
			return c, fmt.Errorf("options[%d]: %q is offered twice", i, o)
		}
		c.Options = append(c.Options, o)
	}
	rec, err := recommended(in.Recommended)
	if err != nil || rec == nil {
		return c, err
	}
	if !slices.Contains(c.Options, *rec) {
		return c, fmt.Errorf("recommended: %q is not one of the options", *rec)
	}
	c.Recommended = rec
	return c, nil
}

// recommended reads a string, or a list of at most one (a model that
// reads "at most one" as a list), null or absent meaning none.
func recommended(raw json.RawMessage) (*string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		one = strings.TrimSpace(one)
		if one == "" {
			return nil, nil
		}
		return &one, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("recommended: want one of the options")
	}
	switch len(list) {
	case 0:
		return nil, nil
	case 1:
		return recommended(json.RawMessage(fmt.Sprintf("%q", list[0])))
	}
	return nil, fmt.Errorf("recommended: at most one option, got %d", len(list))
}

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
