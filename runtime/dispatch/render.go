package dispatch

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/preview"
	"github.com/toolgate/toolgate/tools"
)

// Heard is what the model receives for a call, and which byte ranges of the
// stored result it shows (the only spans that count as evidence).
type Heard struct {
	Text    string
	Visible []preview.Span
}

// The words of each outcome, written once: the model reads them, and the
// tests hold them.
const (
	refusedWords    = "Refused: nothing ran. Why: %s"
	outageWords     = "Outage: the tool never ran (%s, after %s); nothing was done. Try again later or go on without it."
	noAnswerWords   = "Outage: the tool gave no answer (%s, after %s); nothing was changed. Try again later or go on without it."
	mayHaveRunWords = "May or may not have run: the request reached the tool but no answer came back (%s, after %s). It may have changed something: check before repeating it."
	errorWords      = "Error: the tool ran and failed: %s"
	declinedWords   = "Declined: the call never ran. %s"
	absenceWords    = "No match: the tool ran and found nothing."
	absenceWhy      = "No match: the tool ran and found nothing (%s)."
	noHitsWords     = "No item gave hits."
	answeredAfter   = "\n[answered after %s]"
	gaveUpAfter     = "\n[gave up after %s]"
)

// Render says a result to the model. Each outcome has its own words: hits
// pass whole or as a preview within 6,000 characters; an absence says the
// tool ran and matched nothing; an outage says it gave no answer and
// changed nothing; "may have run" says a write may have happened; a
// refusal says nothing ran and why; an error says it ran and failed. The
// items of a many-item call that gave no hits are told one by one, each
// in its kind's words, and the attempts are told whenever there were more
// than one.
func Render(res Result, def tools.Definition, ref string, truncatedAtSource bool) (Heard, error) {
	var h Heard
	switch res.Outcome {
	case schematype.OutcomeRefused:
		h.Text = fmt.Sprintf(refusedWords, res.Message)
	case schematype.OutcomeOutage:
		words := outageWords
		if res.Reached {
			// A read, or a write its backend answered had failed: it may
			// have run, but nothing came of it.
			words = noAnswerWords
		}
		h.Text = fmt.Sprintf(words, orNoItem(res.Message), attempts(res.Attempts))
	case schematype.OutcomeMayHaveRun:
		h.Text = fmt.Sprintf(mayHaveRunWords, res.Message, attempts(res.Attempts))
	case schematype.OutcomeError:
		h.Text = fmt.Sprintf(errorWords, res.Message)
	case schematype.OutcomeDeclined:
		h.Text = fmt.Sprintf(declinedWords, res.Message)
	case schematype.OutcomeAbsence:
		h.Text = absenceWords
		if res.Message != "" {
			h.Text = fmt.Sprintf(absenceWhy, res.Message)
		}
	case schematype.OutcomeHits:
		body, visible, err := hits(res, def, ref, truncatedAtSource)
		if err != nil {
			return Heard{}, err
		}
		h.Text, h.Visible = body, visible
	}
	if len(res.Failures) > 0 {
		h.Text = items(h.Text, res)
	}
	switch {
	case res.Attempts <= 1:
	case res.Outcome == schematype.OutcomeOutage && res.Message == "":
		// The items said why they never ran; the call says how hard it
		// tried.
		h.Text += fmt.Sprintf(gaveUpAfter, attempts(res.Attempts))
	case res.Outcome != schematype.OutcomeOutage && res.Outcome != schematype.OutcomeMayHaveRun:
		h.Text += fmt.Sprintf(answeredAfter, attempts(res.Attempts))
	}
	return h, nil
}

// items tells the items that gave no hits, each in its kind's words. The
// items not listed gave the hits above.
func items(head string, res Result) string {
	var b strings.Builder
	if res.Message == "" && res.Outcome != schematype.OutcomeHits {
		// The outcome was settled from the items: they say it all.
		head = noHitsWords
	}
	b.WriteString(head)
	if res.Outcome == schematype.OutcomeHits {
		b.WriteString("\nThe other items gave no hits:")
	} else {
		b.WriteString("\nPer item:")
	}
	for _, f := range res.Failures {
		fmt.Fprintf(&b, "\n- #%d", f.Item)
		if f.Input != "" {
			fmt.Fprintf(&b, " (%s)", f.Input)
		}
		b.WriteString(": ")
		b.WriteString(ItemWords(f))
	}
	return b.String()
}

// ItemWords says what became of one failed item.
func ItemWords(f schematype.ItemFailure) string {
	switch f.Kind.Or() {
	case schematype.FailureAbsence:
		return "no match: it ran and found nothing" + because(f.Message)
	case schematype.FailureOutage:
		return "outage: it never ran" + because(f.Message) + "; try it again later"
	case schematype.FailureRefused:
		return "refused, nothing ran" + because(f.Message)
	default:
		return "error: it ran and failed" + because(f.Message)
	}
}

func because(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

func orNoItem(msg string) string {
	if msg == "" {
		return "no item ran"
	}
	return msg
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

func hits(res Result, def tools.Definition, ref string, truncatedAtSource bool) (string, []preview.Span, error) {
	if res.Kind == schematype.KindMedia {
		return mediaWords(res.Content, ref), nil, nil
	}
	if def.Preview == tools.PreviewExempt {
		return string(res.Content), []preview.Span{{Start: 0, End: int64(len(res.Content))}}, nil
	}
	kind := res.Kind
	if kind == "" {
		kind = schematype.KindText
	}
	p, err := preview.Build(kind, res.Content, preview.Context{Ref: ref, TruncatedAtSource: truncatedAtSource})
	if err != nil {
		return "", nil, fmt.Errorf("preview: %w", err)
	}
	return string(p.Body), p.Visible, nil
}
