package graph_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/embed"
)

// embeddingsServer is an OpenAI-compatible /v1/embeddings server. It
// answers each input with its local (lexical) vector, counts requests, and
// answers 503 to any request holding an input that contains poison, or to
// every request while down is set.
type embeddingsServer struct {
	requests atomic.Int32
	down     atomic.Bool
	poison   string
	mu       sync.Mutex
	inputs   [][]string
}

func (f *embeddingsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	var req struct {
		Input []string `json:"input"`
		Model string   `json:"model"`
	}
	if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.inputs = append(f.inputs, req.Input)
	f.mu.Unlock()
	for _, in := range req.Input {
		if f.down.Load() || (f.poison != "" && strings.Contains(in, f.poison)) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"message":"embedding backend is down"}}`))
			return
		}
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]item, len(req.Input))
	for i, in := range req.Input {
		data[i] = item{"embedding", i, embed.Vector(in)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
}

// reset forgets the requests counted so far.
func (f *embeddingsServer) reset() {
	f.requests.Store(0)
	f.mu.Lock()
	f.inputs = nil
	f.mu.Unlock()
}

// docTools is a knowledge base bound to an agent, another left unbound,
// another organisation's, two conversations of Bob's with a file each, and
// an embedder that talks to fake through the official SDK, with the
// runtime's retry loop (2 attempts, no waits) as the server wires it.
type docTools struct {
	*testBundle
	fake                         *embeddingsServer
	conv, otherConv              string
	travel, big, secret, foreign string // document ids
	notes, otherNotes            string // attachment ids
	handbook, board, evil        string // knowledge base ids; the agent binds handbook
	agent                        string
}

const bigChars = 100_000

func docToolsSetup(t *testing.T, d *db.DB) *docTools {
	t.Helper()
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
	x := &docTools{testBundle: docSetupWith(t, d, e), fake: fake}

	kb := func(token, name string) string {
		return get(x.do(t, token, `mutation($n: String!) { createKnowledgeBase(input: {name: $n}) { id } }`, map[string]any{"n": name}).ok(t),
			"createKnowledgeBase", "id").(string)
	}
	add := func(token, kb, title, text string) string {
		return get(x.do(t, token, `mutation($kb: ID!, $t: String!, $x: String!) { addDocument(input: {knowledgeBaseId: $kb, title: $t, text: $x}) { id } }`,
			map[string]any{"kb": kb, "t": title, "x": text}).ok(t), "addDocument", "id").(string)
	}
	x.handbook, x.board, x.evil = kb(x.alice.Token, "Handbook"), kb(x.alice.Token, "Board"), kb(x.eve.Token, "Evil")
	handbook, secrets, evil := x.handbook, x.board, x.evil
	x.travel = add(x.alice.Token, handbook, "Travel policy", "Expenses are reimbursed until the 5th of the following month.\n\n"+
		"Error code ZX-4411 means the VPN token expired.")
	add(x.alice.Token, handbook, "Cafeteria", "The cafeteria opens at noon and closes at three.")
	x.big = add(x.alice.Token, handbook, "Archive", strings.Repeat("0123456789", bigChars/10))
	x.secret = add(x.alice.Token, secrets, "Merger", "The merger code name is BLUEFIN. Expenses are reimbursed weekly.")
	x.foreign = add(x.eve.Token, evil, "Evil handbook", "Error code ZX-4411 at Evil: expenses reimbursed daily.")

	x.agent = get(x.do(t, x.alice.Token, `mutation($kb: [ID!]) { createAgent(input: {name: "Librarian", tools: ["knowledge_search", "read_document", "search_attachments"], knowledgeBaseIds: $kb}) { id } }`,
		map[string]any{"kb": []string{handbook}}).ok(t), "createAgent", "id").(string)
	x.conv = x.startConversation(t, x.bob.Token, x.agent, "Trip")
	x.otherConv = x.startConversation(t, x.bob.Token, x.agent, "Other")
	const attach = `mutation($c: ID!, $file: Upload!) { attachFile(input: {conversationId: $c, file: $file}) { id } }`
	x.notes = get(x.upload(t, x.bob.Token, attach, map[string]any{"c": x.conv, "file": nil}, "variables.file", "notes.txt",
		[]byte("The offsite budget is 12,000 EUR, agreed in March.")).ok(t), "attachFile", "id").(string)
	x.otherNotes = get(x.upload(t, x.bob.Token, attach, map[string]any{"c": x.otherConv, "file": nil}, "variables.file", "other.txt",
		[]byte("The offsite budget of the other team is 3,000 EUR.")).ok(t), "attachFile", "id").(string)

	require.Eventually(t, func() bool {
		for _, tok := range []string{x.alice.Token, x.eve.Token} {
			for _, e := range get(x.do(t, tok, `{ knowledgeBases { edges { node { documents(first: 20) { edges { node { status } } } } } } }`, nil).ok(t), "knowledgeBases", "edges").([]any) {
				for _, doc := range get(e, "node", "documents", "edges").([]any) {
					if get(doc, "node", "status") != "READY" {
						return false
					}
				}
			}
		}
		for _, c := range []string{x.conv, x.otherConv} {
			a := get(x.do(t, x.bob.Token, `query($id: ID!) { conversation(id: $id) { attachments { status } } }`, map[string]any{"id": c}).ok(t), "conversation", "attachments").([]any)
			if len(a) != 1 || get(a[0], "status") != "READY" {
				return false
			}
		}
		return true
	}, 3*time.Minute, 100*time.Millisecond, "nine files read, each in a child of a race-built binary, on a loaded machine")
	fake.reset()
	return x
}

// titles returns the titles of one query's hits.
func titles(t *testing.T, data map[string]any, field string, query int) []string {
	t.Helper()
	var out []string
	for _, h := range get(data, field, "results", query, "hits").([]any) {
		out = append(out, get(h, "title").(string))
	}
	return out
}

func TestKnowledgeSearchBatchesOneEmbeddingRequestAndReportsEachQuery(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		x := docToolsSetup(t, d)
		tok := x.scopeToken(t, x.conv, "knowledge_search")

		queries := []string{"ZX-4411", "when are expenses reimbursed", "quantum chromodynamics"}
		data := x.call(t, tok, "knowledge_search", x.conv, map[string]any{"queries": queries}).ok(t)
		require.EqualValues(t, 1, x.fake.requests.Load(), "three queries, one embedding request")
		require.Equal(t, [][]string{queries}, x.fake.inputs)

		require.Equal(t, "Travel policy", titles(t, data, "knowledgeSearch", 0)[0], "an exact term")
		require.Equal(t, "Travel policy", titles(t, data, "knowledgeSearch", 1)[0])
		require.Empty(t, titles(t, data, "knowledgeSearch", 2))
		for i, q := range queries {
			require.Equal(t, q, get(data, "knowledgeSearch", "results", i, "query"), "answered in order")
		}
		hit := get(data, "knowledgeSearch", "results", 0, "hits", 0).(map[string]any)
		require.Equal(t, x.travel, hit["documentId"])
		require.Contains(t, hit["text"], "ZX-4411")
		require.EqualValues(t, 0, hit["position"])
		require.Equal(t, []any{map[string]any{"item": 2.0, "input": "quantum chromodynamics", "kind": "ABSENCE", "message": "the search ran and matched nothing"}},
			get(data, "knowledgeSearch", "failures"))
		// Neither the unbound knowledge base nor another organisation's is searched.
		for i := range queries {
			for _, title := range titles(t, data, "knowledgeSearch", i) {
				require.NotContains(t, []string{"Merger", "Evil handbook"}, title)
			}
		}

		// The embedding provider cannot embed one query: after its retries
		// the batch is tried query by query, and only that query is an outage.
		x.fake.reset()
		queries = []string{"ZX-4411", "quantum chromodynamics", "ZZ-DOWN reimbursed"}
		data = x.call(t, tok, "knowledge_search", x.conv, map[string]any{"queries": queries}).ok(t)
		require.EqualValues(t, 2+3, x.fake.requests.Load(), "two attempts at the batch, then one each")
		require.Equal(t, "Travel policy", titles(t, data, "knowledgeSearch", 0)[0])
		require.Empty(t, titles(t, data, "knowledgeSearch", 2))
		fs := get(data, "knowledgeSearch", "failures").([]any)
		require.Len(t, fs, 2)
		require.Equal(t, []any{1.0, "ABSENCE"}, []any{get(fs[0], "item"), get(fs[0], "kind")})
		require.Equal(t, []any{2.0, "OUTAGE"}, []any{get(fs[1], "item"), get(fs[1], "kind")})
		require.Contains(t, get(fs[1], "message"), "503")

		// The provider down: every query is an outage, none an absence.
		x.fake.down.Store(true)
		data = x.call(t, tok, "knowledge_search", x.conv, map[string]any{"queries": []string{"ZX-4411", "cafeteria"}}).ok(t)
		for _, f := range get(data, "knowledgeSearch", "failures").([]any) {
			require.Equal(t, "OUTAGE", get(f, "kind"))
		}
		require.Len(t, get(data, "knowledgeSearch", "failures"), 2)
		x.fake.down.Store(false)

		// Bad arguments are refused naming them, before any request.
		x.fake.reset()
		for _, args := range []map[string]any{
			{"queries": []string{"a", "b", "c", "d", "e", "f"}},
			{"queries": []string{"travel", " Travel "}},
			{"queries": []string{"travel"}, "maxResults": 21},
		} {
			r := x.call(t, tok, "knowledge_search", x.conv, args)
			require.Equal(t, "BAD_USER_INPUT", r.code(t), string(r.Raw))
		}
		require.Zero(t, x.fake.requests.Load())

		// maxResults bounds each query's hits; the default is the named one.
		data = x.call(t, tok, "knowledge_search", x.conv, map[string]any{"queries": []string{"expenses reimbursed cafeteria"}, "maxResults": 1}).ok(t)
		require.Len(t, titles(t, data, "knowledgeSearch", 0), 1)
		require.Greater(t, document.DefaultMaxResults, 5, "document search returns more hits than memory search")
	})
}

func TestSearchAttachmentsReachesOnlyThisConversation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		x := docToolsSetup(t, d)
		tok := x.scopeToken(t, x.conv, "search_attachments")
		data := x.call(t, tok, "search_attachments", x.conv, map[string]any{"queries": []string{"offsite budget", "ZX-4411"}}).ok(t)
		require.EqualValues(t, 1, x.fake.requests.Load())
		require.Equal(t, []string{"notes.txt"}, titles(t, data, "searchAttachments", 0))
		require.Equal(t, x.notes, get(data, "searchAttachments", "results", 0, "hits", 0, "documentId"))
		require.Empty(t, titles(t, data, "searchAttachments", 1), "knowledge bases are not searched")
		// The scope token of one conversation cannot name another.
		require.Equal(t, "NOT_FOUND", x.call(t, tok, "search_attachments", x.otherConv, map[string]any{"queries": []string{"offsite"}}).code(t))
		// With an API token, the conversation named; another organisation's is not found.
		require.Equal(t, "NOT_FOUND", x.call(t, x.eve.Token, "search_attachments", x.conv, map[string]any{"queries": []string{"offsite"}}).code(t))
		data = x.call(t, x.bob.Token, "search_attachments", x.otherConv, map[string]any{"queries": []string{"offsite budget"}}).ok(t)
		require.Equal(t, []string{"other.txt"}, titles(t, data, "searchAttachments", 0))
	})
}

func TestReadDocumentWindowsAndRefusesIDsOutOfReach(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		x := docToolsSetup(t, d)
		tok := x.scopeToken(t, x.conv, "read_document")
		read := func(args map[string]any) *response { return x.call(t, tok, "read_document", x.conv, args) }

		r := get(read(map[string]any{"documentId": x.travel}).ok(t), "readDocument").(map[string]any)
		require.Equal(t, "Travel policy", r["title"])
		require.Contains(t, r["text"], "ZX-4411")
		require.Equal(t, false, r["truncated"])
		require.Nil(t, r["nextOffset"])

		// Windows of up to 40,000 characters, continued from nextOffset.
		r = get(read(map[string]any{"documentId": x.big, "maxChars": document.ReadMaxChars}).ok(t), "readDocument").(map[string]any)
		require.Len(t, r["text"], document.ReadMaxChars)
		require.Equal(t, true, r["truncated"])
		require.EqualValues(t, document.ReadMaxChars, r["nextOffset"])
		require.EqualValues(t, bigChars, r["totalChars"])
		r = get(read(map[string]any{"documentId": x.big, "offset": 80_000, "maxChars": document.ReadMaxChars}).ok(t), "readDocument").(map[string]any)
		require.Len(t, r["text"], 20_000)
		require.Equal(t, false, r["truncated"])
		r = get(read(map[string]any{"documentId": x.big}).ok(t), "readDocument").(map[string]any)
		require.Len(t, r["text"], document.ReadDefaultChars)
		tooMuch := read(map[string]any{"documentId": x.big, "maxChars": document.ReadMaxChars + 1})
		require.Equal(t, "BAD_USER_INPUT", tooMuch.code(t))
		require.Contains(t, tooMuch.Errors[0].Message, "maxChars")

		// This conversation's attachment reads.
		r = get(read(map[string]any{"documentId": x.notes}).ok(t), "readDocument").(map[string]any)
		require.Contains(t, r["text"], "12,000 EUR")

		// Another organisation's document, another conversation's
		// attachment, a knowledge base the agent does not bind and a
		// made-up id: one answer, byte for byte.
		want := read(map[string]any{"documentId": "tg0000000000000"})
		require.Equal(t, "NOT_FOUND", want.code(t))
		for _, id := range []string{x.foreign, x.otherNotes, x.secret, "doc-1"} {
			require.Equal(t, string(want.Raw), string(read(map[string]any{"documentId": id}).Raw), id)
		}
	})
}

func TestUpdateAgentRebindsKnowledgeBases(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		x := docToolsSetup(t, d)
		const update = `mutation($id: ID!, $kb: [ID!]) { updateAgent(input: {id: $id, knowledgeBaseIds: $kb}) { agent { id } } }`
		search := func(q string) []string {
			return titles(t, x.call(t, x.bob.Token, "knowledge_search", x.conv, map[string]any{"queries": []string{q}}).ok(t), "knowledgeSearch", 0)
		}
		require.Contains(t, search("ZX-4411"), "Travel policy")

		// Another organisation's knowledge base is refused like one that never was.
		foreign := x.do(t, x.alice.Token, update, map[string]any{"id": x.agent, "kb": []string{x.board, x.evil}})
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		require.Equal(t, string(x.do(t, x.alice.Token, update, map[string]any{"id": x.agent, "kb": []string{"tg0000000000000"}}).Raw), string(foreign.Raw))
		require.Contains(t, search("ZX-4411"), "Travel policy", "a refused update changes nothing")

		x.do(t, x.alice.Token, update, map[string]any{"id": x.agent, "kb": []string{x.board}}).ok(t)
		require.Equal(t, []string{"Merger"}, search("BLUEFIN"))
		require.NotContains(t, search("ZX-4411"), "Travel policy", "the handbook is no longer bound")

		// Left out, the list stays; empty, nothing is bound.
		x.do(t, x.alice.Token, `mutation($id: ID!) { updateAgent(input: {id: $id, name: "Renamed"}) { agent { id } } }`, map[string]any{"id": x.agent}).ok(t)
		require.Equal(t, []string{"Merger"}, search("BLUEFIN"))
		x.do(t, x.alice.Token, update, map[string]any{"id": x.agent, "kb": []string{}}).ok(t)
		r := x.call(t, x.bob.Token, "knowledge_search", x.conv, map[string]any{"queries": []string{"BLUEFIN"}})
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
	})
}

func TestDeleteConversationTakesItsAttachmentsPassages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		x := docToolsSetup(t, d)
		ctx := context.Background()
		count := func(query string, arg any) int {
			var n int
			require.NoError(t, d.SQL.QueryRowContext(ctx, rebind(d.Dialect, query), arg).Scan(&n))
			return n
		}
		doomed, kept := dbID(t, x.conv), dbID(t, x.otherConv)
		doomedNotes := dbID(t, x.notes)
		entries := func(conv int) int {
			return count(`SELECT count(*) FROM hybrid_entries WHERE scope = ?`, document.ConversationScope(conv))
		}
		require.Positive(t, entries(doomed))
		require.Positive(t, count(`SELECT count(*) FROM document_chunks WHERE attachment_id = ?`, doomedNotes))
		keptEntries := entries(kept)
		require.Positive(t, keptEntries)
		knowledge := count(`SELECT count(*) FROM hybrid_entries WHERE scope LIKE ?`, "kb:%")

		x.do(t, x.bob.Token, `mutation($id: ID!) { deleteConversation(id: $id) }`, map[string]any{"id": x.conv}).ok(t)
		require.Zero(t, entries(doomed), "the search index keeps nothing of the deleted conversation")
		require.Zero(t, count(`SELECT count(*) FROM document_chunks WHERE attachment_id = ?`, doomedNotes))
		require.Equal(t, keptEntries, entries(kept))
		require.Equal(t, knowledge, count(`SELECT count(*) FROM hybrid_entries WHERE scope LIKE ?`, "kb:%"))
		data := x.call(t, x.bob.Token, "search_attachments", x.otherConv, map[string]any{"queries": []string{"offsite budget"}}).ok(t)
		require.Equal(t, []string{"other.txt"}, titles(t, data, "searchAttachments", 0))
	})
}

// dbID returns the database id of an API id.
func dbID(t *testing.T, id string) int {
	t.Helper()
	n, err := gid.Decode(id)
	require.NoError(t, err)
	return n
}

// rebind writes ? placeholders as PostgreSQL's $n.
func rebind(dialect, q string) string {
	if dialect != "postgres" {
		return q
	}
	return strings.Replace(q, "?", "$1", 1)
}

func TestCatalogueLabelsTheEmbeddingModel(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	const q = `{ catalogue { embeddingModel { provider model lexical } tools { name offeredWhen } } }`
	b := docSetup(t, d)
	got := b.do(t, b.alice.Token, q, nil).ok(t)
	require.Equal(t, map[string]any{"provider": "local", "model": embed.LocalModel, "lexical": true}, get(got, "catalogue", "embeddingModel"))
	when := map[string]any{}
	for _, tool := range get(got, "catalogue", "tools").([]any) {
		when[get(tool, "name").(string)] = get(tool, "offeredWhen")
	}
	require.Equal(t, "knowledge", when["knowledge_search"])
	require.Equal(t, "knowledge_or_document", when["read_document"])
	require.Equal(t, "attachment", when["search_attachments"])

	x := docToolsSetup(t, d)
	require.Equal(t, map[string]any{"provider": "openai", "model": "bge-small", "lexical": false},
		get(x.do(t, x.alice.Token, q, nil).ok(t), "catalogue", "embeddingModel"))
	plain := setup(t, d) // no documents service: no embedding model
	require.Nil(t, get(plain.do(t, plain.alice.Token, q, nil).ok(t), "catalogue", "embeddingModel"))
}
