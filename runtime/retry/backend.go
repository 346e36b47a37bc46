package retry

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/tools"
)

// Backend is the retry loop the server hands a tool family for the
// requests it makes to its own backends (web.Config.Retry): a request
// failing with a *tools.Transient is tried again on p's schedule,
// honouring the Retry-After its answer carried; any other failure is
// final. It returns the last attempt's own error, as the dispatcher does:
// the family counts the attempts and reports them with the call.
func Backend(p Policy) tools.Retry {
	return func(ctx context.Context, try func(context.Context) error) error {
		_, err := Do(ctx, p, transient, try)
		var exhausted *ExhaustedError
		if errors.As(err, &exhausted) {
			return exhausted.Err
		}
		return err
	}
}

func transient(err error) Verdict {
	var t *tools.Transient
	if !errors.As(err, &t) {
		return Verdict{}
	}
	return Verdict{Retry: true, After: After(t.Header)}
}
