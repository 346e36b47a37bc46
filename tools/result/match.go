package result

import (
	"fmt"
	"io"
	"strconv"
)

// UnmarshalGQL reads the GraphQL enum MatchMode, whose values are the
// model's words: "exact" and "fuzzy".
func (m *Match) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("match: want a string, got %T", v)
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
