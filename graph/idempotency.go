package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/idempotentresponse"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/tools"
)

// IdempotencyHeader names the key a client sends so that repeating a
// mutation is safe: the runtime sends one with every tool call, the same
// on every attempt.
const IdempotencyHeader = "Idempotency-Key"

// maxIdempotencyKey bounds the key's length, as the column does.
const maxIdempotencyKey = 255

// idempotent makes the Idempotency-Key header mean something. The first
// successful answer of a mutation field sent with a key is kept, in the
// mutation's own transaction, under the key and the sender's scope; a
// request repeated with that key gets the same answer back and runs
// nothing. A key reused for a different request is refused.
func idempotent(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	oc := graphql.GetOperationContext(ctx)
	fc := graphql.GetRootFieldContext(ctx)
	key := oc.Headers.Get(IdempotencyHeader)
	if key == "" || oc.Operation == nil || oc.Operation.Operation != ast.Mutation || fc == nil {
		return next(ctx)
	}
	c := ent.FromContext(ctx)
	v, err := auth.FromContext(ctx)
	if c == nil || err != nil {
		// No transaction or no viewer: the resolver refuses on its own.
		return next(ctx)
	}
	if len(key) > maxIdempotencyKey {
		graphql.AddError(ctx, tools.Refusef("%s is over %d characters", IdempotencyHeader, maxIdempotencyKey))
		return graphql.Null
	}
	field := fc.Field.Alias
	hash := requestHash(oc, field)
	prev, err := c.IdempotentResponse.Query().
		Where(idempotentresponse.OrganizationID(v.OrganizationID), idempotentresponse.Scope(v.IdempotencyScope()),
			idempotentresponse.Key(key), idempotentresponse.Field(field)).
		Only(ctx)
	switch {
	case err == nil && prev.RequestHash != hash:
		graphql.AddError(ctx, tools.Refusef("%s %q was already used for a different request", IdempotencyHeader, key))
		return graphql.Null
	case err == nil:
		return raw(prev.Response)
	case !ent.IsNotFound(err):
		graphql.AddError(ctx, err)
		return graphql.Null
	}
	before := len(graphql.GetErrors(ctx))
	var buf bytes.Buffer
	next(ctx).MarshalGQL(&buf)
	if len(graphql.GetErrors(ctx)) > before || buf.String() == "null" {
		// A failed request changes nothing (its transaction rolls back), so
		// its repeat must run again.
		return raw(buf.Bytes())
	}
	err = c.IdempotentResponse.Create().
		SetOrganizationID(v.OrganizationID).SetScope(v.IdempotencyScope()).
		SetKey(key).SetField(field).SetRequestHash(hash).SetResponse(buf.Bytes()).
		Exec(ctx)
	if err != nil {
		// A concurrent twin got there first: this one's transaction rolls back.
		graphql.AddError(ctx, err)
		return graphql.Null
	}
	return raw(buf.Bytes())
}

// requestHash identifies what was asked: the document, its variables and
// the field's response name.
func requestHash(oc *graphql.OperationContext, field string) string {
	vars, _ := json.Marshal(oc.Variables)
	h := sha256.New()
	for _, part := range []string{oc.RawQuery, oc.OperationName, string(vars), field} {
		_, _ = io.WriteString(h, part)
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// raw answers with bytes already marshalled.
func raw(b []byte) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = w.Write(b) })
}
