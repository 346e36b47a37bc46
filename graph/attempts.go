package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/toolgate/toolgate/tools"
)

// AttemptsExtension names the response extension that says how many
// attempts the operation's backend requests took (a search provider, a
// web page, an embedding endpoint), when any took more than one: the most
// that one request needed. The runtime reports it with the tool call's
// outcome, so the model hears the retries made before it heard anything.
const AttemptsExtension = "attempts"

// reportAttempts gives each response a record of attempts that the tool
// families fill in (tools.Try), and sets the extension from it.
func reportAttempts(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	ctx, attempts := tools.WithAttempts(ctx)
	resp := next(ctx)
	if resp == nil || attempts.N() <= 1 {
		return resp
	}
	if resp.Extensions == nil {
		resp.Extensions = map[string]any{}
	}
	resp.Extensions[AttemptsExtension] = attempts.N()
	return resp
}
