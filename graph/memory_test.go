package graph_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools/embed"
)

// TestMemory: facts are saved per item (too long, a duplicate and an
// embedding outage fail alone and are named; the others are stored, with
// one embedding request for the call); memory_search finds the person's
// own facts only (not a colleague's in the same organisation), with
// ABSENCE and OUTAGE per query; memory_forget and forgetMemory refuse
// another's memory like a made-up id; memories lists the caller's own.
func TestMemory(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		fake := &embeddingsServer{poison: "ZZ-DOWN"}
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		e, err := embed.New(embed.Config{Provider: embed.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "test", Model: "bge-small",
			Middleware: model.Middleware,
			Retry: func(ctx context.Context, call func(context.Context) error) error {
				_, err := model.Call(ctx, retry.Policy{Attempts: 2, Sleep: retry.NoWait}, "embeddings", func(ctx context.Context) (struct{}, error) {
					return struct{}{}, call(ctx)
				})
				return err
			}})
		require.NoError(t, err)
		b := docSetupWith(t, d, e)
		agent := b.createAgent(t, b.alice.Token, "Helper")
		aliceConv := b.startConversation(t, b.alice.Token, agent, "a")
		bobConv := b.startConversation(t, b.bob.Token, agent, "b")
		alice := b.scopeToken(t, aliceConv, "memory_write", "memory_search", "memory_forget")
		bob := b.scopeToken(t, bobConv, "memory_write", "memory_search", "memory_forget")
		write := func(token, conv string, facts ...string) map[string]any {
			in := make([]map[string]any, len(facts))
			for i, f := range facts {
				in[i] = map[string]any{"text": f}
			}
			return get(b.call(t, token, "memory_write", conv, map[string]any{"facts": in}).ok(t), "memoryWrite").(map[string]any)
		}

		fake.reset()
		got := write(alice, aliceConv, "Alice prefers metric units.", strings.Repeat("x", 501), "Alice leads the Oslo office.",
			"ZZ-DOWN this one cannot be embedded", "alice PREFERS metric   units.")
		stored := got["stored"].([]any)
		require.Len(t, stored, 2)
		require.Equal(t, "Alice prefers metric units.", get(stored[0], "text"))
		require.Equal(t, "Alice leads the Oslo office.", get(stored[1], "text"))
		failures := got["failures"].([]any)
		require.Len(t, failures, 3)
		require.Equal(t, []any{1.0, "ERROR"}, []any{get(failures[0], "item"), get(failures[0], "kind")})
		require.Contains(t, get(failures[0], "message"), "over 500")
		require.Equal(t, []any{3.0, "OUTAGE"}, []any{get(failures[1], "item"), get(failures[1], "kind")})
		require.Equal(t, []any{4.0, "ERROR"}, []any{get(failures[2], "item"), get(failures[2], "kind")})
		require.Equal(t, "repeats facts[0] of this call: nothing more was saved", get(failures[2], "message"))
		again := write(alice, aliceConv, "Alice prefers metric units.")
		require.Empty(t, again["stored"], "a duplicate of a stored fact")
		require.Equal(t, "already remembered (id "+get(stored[0], "id").(string)+"): nothing was saved",
			get(again["failures"].([]any)[0], "message"), "named by the id the API shows")

		write(bob, bobConv, "Bob is allergic to peanuts.")
		fake.reset()
		search := func(token, conv string, queries ...string) map[string]any {
			return get(b.call(t, token, "memory_search", conv, map[string]any{"queries": queries}).ok(t), "memorySearch").(map[string]any)
		}
		found := search(alice, aliceConv, "metric units", "peanuts allergy")
		require.EqualValues(t, 1, fake.requests.Load(), "one embedding request for the call")
		results := found["results"].([]any)
		require.Equal(t, "Alice prefers metric units.", get(results[0], "hits", 0, "text"))
		require.Empty(t, get(results[1], "hits"), "a colleague's memory is never found")
		require.Equal(t, "ABSENCE", get(found["failures"].([]any)[0], "kind"))
		outage := search(alice, aliceConv, "Oslo office", "ZZ-DOWN query")
		require.Equal(t, "Alice leads the Oslo office.", get(outage["results"].([]any)[0], "hits", 0, "text"))
		require.Equal(t, []any{1.0, "OUTAGE"}, []any{get(outage["failures"].([]any)[0], "item"), get(outage["failures"].([]any)[0], "kind")})

		mine := get(b.do(t, b.alice.Token, `{ memories(first: 10) { totalCount edges { node { id text createdAt } } } }`, nil).ok(t), "memories")
		require.EqualValues(t, 2, get(mine, "totalCount"), "the caller's own, an admin's too")
		bobs := get(b.do(t, b.bob.Token, `{ memories(first: 10) { edges { node { id text } } } }`, nil).ok(t), "memories", "edges").([]any)
		require.Len(t, bobs, 1)
		bobMemory := get(bobs[0], "node", "id").(string)

		aliceMemory := get(stored[0], "id").(string)
		forget := get(b.call(t, alice, "memory_forget", aliceConv, map[string]any{"ids": []string{aliceMemory, bobMemory, gid.Encode(1<<40 + 7)}}).ok(t), "memoryForget").(map[string]any)
		require.Equal(t, []any{aliceMemory}, forget["forgotten"])
		ff := forget["failures"].([]any)
		require.Len(t, ff, 2)
		require.Equal(t, get(ff[0], "message"), get(ff[1], "message"), "another's memory and a made-up id read alike")
		require.Empty(t, get(search(alice, aliceConv, "metric units")["results"].([]any)[0], "hits"), "forgotten: never found again")

		foreign := b.do(t, b.alice.Token, `mutation($id: ID!) { forgetMemory(id: $id) { id } }`, map[string]any{"id": bobMemory})
		madeUp := b.do(t, b.alice.Token, `mutation($id: ID!) { forgetMemory(id: $id) { id } }`, map[string]any{"id": gid.Encode(1<<40 + 7)})
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		require.Equal(t, string(madeUp.Raw), string(foreign.Raw))
		gone := get(b.do(t, b.bob.Token, `mutation($id: ID!) { forgetMemory(id: $id) { text } }`, map[string]any{"id": bobMemory}).ok(t), "forgetMemory", "text")
		require.Equal(t, "Bob is allergic to peanuts.", gone)

		require.Equal(t, "NOT_FOUND", b.call(t, b.scopeToken(t, aliceConv, "calculator"), "memory_search", aliceConv,
			map[string]any{"queries": []string{"x"}}).code(t), "a turn not offered memory cannot use it")
	})
}
