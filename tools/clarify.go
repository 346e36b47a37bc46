package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// A question the turn waits on: clarify's arguments, which the runtime
// reads when it carries the call out and again when it pauses and resumes
// the turn, and the API reads when it rebuilds the turn's events. The
// contract lives here, beside Definition.Pauses, so the runtime needs no
// tool family to read it.

// ClarifyTool is the name of clarify, the tool that asks the person a
// question and pauses the turn (interact.Clarify).
const ClarifyTool = "clarify"

// The limits of a clarification.
const (
	// MaxClarifyOptions is how many options a clarification may offer.
	MaxClarifyOptions = 6
	// MaxClarifyOptionChars bounds each option.
	MaxClarifyOptionChars = 200
	// MaxClarifyQuestionChars bounds the question.
	MaxClarifyQuestionChars = 1_000
)

// Clarification is a validated clarify call.
type Clarification struct {
	Question string   `json:"question"`
	Options  []string `json:"options"`
	// Recommended is one of Options, or nil.
	Recommended *string `json:"recommended,omitempty"`
}

// ParseClarify reads and checks clarify's arguments: one question, at most
// MaxClarifyOptions distinct options, and at most one recommendation, which must
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
	if n := utf8.RuneCountInString(c.Question); n > MaxClarifyQuestionChars {
		return c, fmt.Errorf("question: at most %d characters, got %d", MaxClarifyQuestionChars, n)
	}
	if len(in.Options) > MaxClarifyOptions {
		return c, fmt.Errorf("options: at most %d, got %d", MaxClarifyOptions, len(in.Options))
	}
	c.Options = make([]string, 0, len(in.Options))
	for i, o := range in.Options {
		o = strings.TrimSpace(o)
		switch {
		case o == "":
			return c, fmt.Errorf("options[%d]: empty", i)
		case utf8.RuneCountInString(o) > MaxClarifyOptionChars:
			return c, fmt.Errorf("options[%d]: at most %d characters", i, MaxClarifyOptionChars)
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
