package result

import (
	"fmt"
	"io"
	"strconv"
)

// UnmarshalGQL reads the GraphQL enum MatchMode: EXACT and FUZZY, or the
// deprecated lower-case values, which are the model's words.
func (m *Match) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("match: want a string, got %T", v)
	}
	switch s {
	case "EXACT":
		s = string(Exact)
	case "FUZZY":
		s = string(Fuzzy)
	}
	switch Match(s) {
	case Exact, Fuzzy:
		*m = Match(s)
		return nil
	}
	return fmt.Errorf("match: %q is not %q or %q", s, Exact, Fuzzy)
}

// MarshalGQL writes m as the GraphQL enum MatchMode.
func (m Match) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(m)))
}
