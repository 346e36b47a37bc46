package tools

import (
	"encoding/json"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
)

// The rules of a question's pause, read by the runtime that pauses and
// resumes the turn and by the API that rebuilds the turn's events from
// what is stored: one definition for both, in the base package so neither
// imports a tool family for it.

// Asking returns the index of the first of a step's calls that asked the
// person a question (a call of a tool that pauses the turn, pauses says
// which, that ran and succeeded), or -1.
func Asking(calls []*ent.ToolCall, pauses func(name string) bool) int {
	for i, c := range calls {
		if pauses(c.Name) && c.Outcome.Succeeded() {
			return i
		}
	}
	return -1
}

// Question is the clarification call asked for, as the turn stores it
// while it waits (no answer yet).
func Question(call *ent.ToolCall) (schematype.Clarification, error) {
	c, err := ParseClarify(json.RawMessage(call.Arguments))
	if err != nil {
		return schematype.Clarification{}, err
	}
	cl := schematype.Clarification{Question: c.Question, Options: c.Options, Recommended: c.Recommended}
	if cl.Options == nil {
		cl.Options = []string{}
	}
	return cl, nil
}

// Answered reports whether cl (the turn's clarification) is the question
// call asked, answered.
func Answered(cl *schematype.Clarification, call *ent.ToolCall) bool {
	if cl == nil || cl.Answer == nil {
		return false
	}
	c, err := ParseClarify(json.RawMessage(call.Arguments))
	return err == nil && c.Question == cl.Question
}
