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

// Render says a result to the model. Each outcome has its own words: hits
// pass whole or as a preview within 6,000 characters; an absence says the
// tool ran and matched nothing; an outage says it never ran and how many
// attempts were made; a refusal and an error say why.
func Render(res Result, def tools.Definition, ref string, truncatedAtSource bool) (Heard, error) {
	var h Heard
	switch res.Outcome {
	case Refused:
		h.Text = "Refused, not run: " + res.Message
	case Outage:
		h.Text = fmt.Sprintf("Outage: the tool never ran (%s after %s). Nothing was done; try again later or go on without it.",
			res.Message, attempts(res.Attempts))
	case Error:
		h.Text = "Error: the tool ran and failed: " + res.Message
	case Absence:
		h.Text = "No match: the tool ran and found nothing."
	case Hits:
		body, visible, err := hits(res, def, ref, truncatedAtSource)
		if err != nil {
			return Heard{}, err
		}
		h.Text, h.Visible = body, visible
	}
	if len(res.Failures) > 0 {
		var b strings.Builder
		b.WriteString(h.Text)
		b.WriteString("\nFailed items:")
		for _, f := range res.Failures {
			if f.Input != "" {
				fmt.Fprintf(&b, "\n- #%d (%s): %s", f.Item, f.Input, f.Message)
			} else {
				fmt.Fprintf(&b, "\n- #%d: %s", f.Item, f.Message)
			}
		}
		h.Text = b.String()
	}
	return h, nil
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

func hits(res Result, def tools.Definition, ref string, truncatedAtSource bool) (string, []preview.Span, error) {
	if res.Kind == schematype.KindMedia {
		return fmt.Sprintf("[media result of %d bytes, stored as ref %s]", len(res.Content), ref), nil, nil
	}
	if def.Preview == tools.PreviewExempt {
		return string(res.Content), []preview.Span{{Start: 0, End: int64(len(res.Content))}}, nil
	}
	p, err := preview.Build(res.Kind, res.Content, preview.Context{Ref: ref, TruncatedAtSource: truncatedAtSource})
	if err != nil {
		return "", nil, fmt.Errorf("preview: %w", err)
	}
	return string(p.Body), p.Visible, nil
}
