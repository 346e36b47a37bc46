package tools

import (
	"fmt"
	"strings"
)

// The lines a later turn reads beside a call whose payload was cut. The
// runtime writes them with these functions, and read_tool_result's guidance quotes
// them with placeholders through the same functions, so what the model is
// told to look for is what it gets.

// CutLine is the terse line a replayed result that was cut carries:
// roughly how much was cut, roughly how much there is, and the ref that
// reads the rest.
func CutLine(cut, total, ref string) string {
	return fmt.Sprintf("[~%s of ~%s chars cut; read_tool_result ref %s for the rest]", cut, total, ref)
}

// ArgumentsLine is the terse line beside a replayed call whose arguments
// were cut: which values, roughly how long each was, and the ref that
// holds the arguments whole. cuts are "path (~N chars)" each.
func ArgumentsLine(cuts []string, ref string) string {
	if ref == "" {
		// Stored before arguments were kept apart: nothing to point at.
		return fmt.Sprintf("[arguments cut: %s]", strings.Join(cuts, ", "))
	}
	return fmt.Sprintf("[arguments cut: %s; read_tool_result ref %s has them whole]", strings.Join(cuts, ", "), ref)
}

// ArgumentCut names one cut argument value for ArgumentsLine.
func ArgumentCut(path, chars string) string {
	return fmt.Sprintf("%s ~%s chars", path, chars)
}
