package schematype

import (
	"io"
	"strconv"
)

// Outcome is how a tool call ended: the one type the dispatcher returns,
// the stored call keeps and the API shows.
type Outcome string

// The outcomes; the model hears each in distinct words.
const (
	// OutcomePending: asked for, not finished yet (stored calls only).
	OutcomePending Outcome = "PENDING"
	// OutcomeHits: it ran and found something.
	OutcomeHits Outcome = "HITS"
	// OutcomeAbsence: it ran and matched nothing.
	OutcomeAbsence Outcome = "ABSENCE"
	// OutcomeOutage: it never ran, after the retries.
	OutcomeOutage Outcome = "OUTAGE"
	// OutcomeRefused: not offered, or arguments that do not fit; never sent.
	OutcomeRefused Outcome = "REFUSED"
	// OutcomeError: it ran and failed.
	OutcomeError Outcome = "ERROR"
	// OutcomeMayHaveRun: the request may have reached the backend but no
	// answer came back; a write is never repeated then, so nobody knows
	// whether it ran.
	OutcomeMayHaveRun Outcome = "MAY_HAVE_RUN"
	// OutcomeDeclined: a person said no before it ran (or nobody decided
	// in time); never sent.
	OutcomeDeclined Outcome = "DECLINED"
)

// Values lists the outcomes, for ent's enum field.
func (Outcome) Values() []string {
	return []string{string(OutcomePending), string(OutcomeHits), string(OutcomeAbsence), string(OutcomeOutage),
		string(OutcomeRefused), string(OutcomeError), string(OutcomeMayHaveRun), string(OutcomeDeclined)}
}

// Succeeded reports whether the call ran without failing: it found
// something or matched nothing. Every other outcome is a failure the
// model hears as one.
func (o Outcome) Succeeded() bool { return o == OutcomeHits || o == OutcomeAbsence }

// String returns the outcome's name.
func (o Outcome) String() string { return string(o) }

// MarshalGQL writes the outcome as a GraphQL enum value.
func (o Outcome) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(o)))
}

// UnmarshalGQL reads a GraphQL enum value.
func (o *Outcome) UnmarshalGQL(v any) error {
	return unmarshalEnum(o, v, "outcome", "not a tool outcome")
}
