// Package memory is the Memory family: facts the assistant saves about the
// person a turn talks to (memory_write), finds again on later turns with
// any of their agents that has the memory switch on (memory_search), and
// forgets (memory_forget). Memories are the user's within the
// organisation: never another user's.
package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/hybrid"
	entmemory "github.com/toolgate/toolgate/ent/memory"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/embed"
)

// Family is the family's name in the catalogue.
const Family = "memory"

// Index is the search index of memories, one passage per memory.
const Index = "memories"

// The family's limits.
const (
	// MaxFacts is the most facts one memory_write saves.
	MaxFacts = 5
	// MaxFactChars bounds one fact.
	MaxFactChars = 500
	// MaxQueries and MaxQueryChars bound memory_search.
	MaxQueries    = 5
	MaxQueryChars = 400
	// DefaultMaxResults is how many memories each query returns when not
	// told: fewer than document search's default (8), as the tool rules
	// ask.
	DefaultMaxResults = 5
	// MaxMaxResults is the most memories one query may ask for.
	MaxMaxResults = 10
	// MaxForget is the most ids one memory_forget names.
	MaxForget = 20
	// MaxPerUser bounds what is remembered about one person.
	MaxPerUser = 1000
)

// Similarity floors, as document search keeps them: a vector neighbour
// below is no hit.
const (
	MinSimilarity        = 0.3
	MinSimilarityLexical = 0.2
)

// ErrNoEmbeddings refuses the memory tools on a server with no embedding model.
var ErrNoEmbeddings = tools.Refusef("memory needs an embedding model, and this server has none configured")

var (
	// Write is memory_write.
	Write = tools.Definition{
		Name:   "memory_write",
		Brief:  "Save lasting facts about the person for later conversations.",
		Family: Family,
		Description: "Save up to " + strconv.Itoa(MaxFacts) + " lasting facts about the person you are talking to " +
			"(preferences, their role, standing decisions), each a short sentence, for later conversations with any of " +
			"their assistants. Don't save what only matters to this conversation, anything about other people, secrets, " +
			"or what is already remembered; a fact that fails is listed under failures and the others stand.",
		Schema: json.RawMessage(`{"type":"object","properties":{"facts":{"type":"array","minItems":1,"maxItems":` + strconv.Itoa(MaxFacts) +
			`,"items":{"type":"object","properties":{"text":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(MaxFactChars) +
			`}},"required":["text"],"additionalProperties":false}}},"required":["facts"],"additionalProperties":false}`),
		Offered: tools.OfferMemorySwitch,
		Effect:  tools.EffectWrite,
		Preview: tools.PreviewExempt,
		Limits:  map[string]int{"facts": MaxFacts, "factChars": MaxFactChars},
		Operation: `mutation($conversationId: ID, $facts: [MemoryFactInput!]!) {
  memoryWrite(conversationId: $conversationId, facts: $facts) { stored { id text } failures { item input kind message } }
}`,
		Field: "memoryWrite",
	}

	// Search is memory_search.
	Search = tools.Definition{
		Name:   "memory_search",
		Brief:  "Search what is remembered about the person you are talking to.",
		Family: Family,
		Description: "Search what is remembered about the person you are talking to: up to 5 distinct angles in one " +
			"call, run at once and answered in order; each hit gives id, text and when it was saved. Don't use it for " +
			"documents, this conversation (read_transcript) or facts about the world.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			tools.QueriesSchema(MaxQueries, MaxQueryChars) + `,` +
			`"maxResults":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(MaxMaxResults) + `,"description":"memories per query, default ` + strconv.Itoa(DefaultMaxResults) + `"}},` +
			`"required":["queries"],"additionalProperties":false}`),
		Guidance:    tools.SearchGuidance,
		GuidanceKey: tools.SearchGuidanceKey,
		Offered:     tools.OfferMemorySwitch,
		Effect:      tools.EffectRead,
		Preview:     tools.PreviewLarge,
		Limits: map[string]int{"queries": MaxQueries, "queryChars": MaxQueryChars,
			"defaultMaxResults": DefaultMaxResults, "maxResults": MaxMaxResults},
		Operation: `query($conversationId: ID, $queries: [String!]!, $maxResults: Int) {
  memorySearch(conversationId: $conversationId, queries: $queries, maxResults: $maxResults) {
    results { query hits { id text createdAt } } failures { item input kind message }
  }
}`,
		Field:  "memorySearch",
		Absent: tools.NothingFound("hits"),
	}

	// Forget is memory_forget.
	Forget = tools.Definition{
		Name:   "memory_forget",
		Brief:  "Forget remembered facts by id.",
		Family: Family,
		Description: "Forget remembered facts by id (ids from memory_search), when the person asks you to or a fact " +
			"is wrong. Don't forget a fact just to save a corrected one: save the new one and forget the old.",
		Schema: json.RawMessage(`{"type":"object","properties":{"ids":{"type":"array","minItems":1,"maxItems":` + strconv.Itoa(MaxForget) +
			`,"items":{"type":"string"}}},"required":["ids"],"additionalProperties":false}`),
		Offered: tools.OfferMemorySwitch,
		Effect:  tools.EffectIdempotent,
		Preview: tools.PreviewExempt,
		Limits:  map[string]int{"ids": MaxForget},
		Operation: `mutation($conversationId: ID, $ids: [ID!]!) {
  memoryForget(conversationId: $conversationId, ids: $ids) { forgotten failures { item input kind message } }
}`,
		Field: "memoryForget",
	}

	// Definitions are the family's tools in registration order.
	Definitions = []tools.Definition{Search, Write, Forget}
)

// Hit is one memory found.
type Hit struct {
	ID        int       `json:"id"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"createdAt"`
}

// QueryHits is one query's memories, best first.
type QueryHits = tools.QueryHits[Hit]

// SearchResult is what memory_search returns.
type SearchResult struct {
	Results  []QueryHits              `json:"results"`
	Failures []schematype.ItemFailure `json:"failures"`
}

// Stored is a fact memory_write saved.
type Stored struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
}

// WriteResult is what memory_write returns.
type WriteResult struct {
	Stored   []Stored                 `json:"stored"`
	Failures []schematype.ItemFailure `json:"failures"`
}

// ForgetResult is what memory_forget returns.
type ForgetResult struct {
	Forgotten []int                    `json:"forgotten"`
	Failures  []schematype.ItemFailure `json:"failures"`
}

// Service saves, searches and forgets memories.
type Service struct {
	store    *hybrid.Store
	client   *ent.Client
	embedder embed.Embedder
	publicID func(int) string
}

// New returns the service over d; e nil means no embedding model, and every
// call is refused. publicID gives a memory's id as the API shows it (and
// memory_forget takes it): the only id a failure may name, since a row's
// number means nothing to the model or a client.
func New(d *db.DB, e embed.Embedder, publicID func(int) string) *Service {
	return &Service{store: hybrid.New(d.SQL, d.Dialect, Index), client: d.Client(), embedder: e, publicID: publicID}
}

// Scope is the index scope of a user's memories.
func Scope(user int) string { return fmt.Sprintf("user:%d", user) }

// normal is a fact as duplicates are compared: as queries are.
func normal(s string) string { return tools.QueryKey(s) }

// Write saves facts about user of org: each is checked, embedded (all in
// one request) and stored alone, so a fact that fails (too long, already
// remembered, not embedded) is a failure beside the others.
func (s *Service) Write(ctx context.Context, org, user int, facts []string) (*WriteResult, error) {
	if s.embedder == nil {
		return nil, ErrNoEmbeddings
	}
	if len(facts) == 0 || len(facts) > MaxFacts {
		return nil, tools.Refusef("facts: give 1 to %d facts, not %d", MaxFacts, len(facts))
	}
	sys := tenancy.System(ctx)
	existing, err := s.client.Memory.Query().Where(entmemory.OrganizationID(org), entmemory.UserID(user)).
		Select(entmemory.FieldID, entmemory.FieldText).All(sys)
	if err != nil {
		return nil, fmt.Errorf("load memories: %w", err)
	}
	known := make(map[string]int, len(existing))
	for _, m := range existing {
		known[normal(m.Text)] = m.ID
	}
	// A repeat within the call is a duplicate too, named by its position.
	earlier := map[string]int{}
	out := &WriteResult{Stored: []Stored{}, Failures: []schematype.ItemFailure{}}
	fail := func(i int, kind schematype.FailureKind, format string, args ...any) {
		out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: facts[i], Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	var keep []int
	for i, f := range facts {
		t := strings.TrimSpace(f)
		switch n := utf8.RuneCountInString(t); {
		case n == 0:
			fail(i, schematype.FailureError, "the fact is empty: nothing was saved")
		case n > MaxFactChars:
			fail(i, schematype.FailureError, "the fact is %d characters, over %d: save it shorter", n, MaxFactChars)
		case known[normal(t)] != 0:
			fail(i, schematype.FailureError, "already remembered (id %s): nothing was saved", s.publicID(known[normal(t)]))
		case hasKey(earlier, normal(t)):
			fail(i, schematype.FailureError, "repeats facts[%d] of this call: nothing more was saved", earlier[normal(t)])
		case len(existing)+len(keep) >= MaxPerUser:
			fail(i, schematype.FailureError, "%d facts are remembered about this person, the most kept: forget some first", MaxPerUser)
		default:
			earlier[normal(t)] = i
			keep = append(keep, i)
		}
	}
	texts := make([]string, len(keep))
	for j, i := range keep {
		texts[j] = strings.TrimSpace(facts[i])
	}
	var vecs [][]float32
	var errs []error
	if len(texts) > 0 {
		vecs, errs = embed.Batch(ctx, s.embedder, texts)
	}
	for j, i := range keep {
		if errs[j] != nil {
			fail(i, schematype.FailureOutage, "not saved: the embedding provider could not be reached (%v); try again later", errs[j])
			continue
		}
		m, err := s.client.Memory.Create().SetOrganizationID(org).SetUserID(user).SetText(texts[j]).Save(sys)
		if err != nil {
			return nil, fmt.Errorf("save memory: %w", err)
		}
		if err := s.store.Put(sys, hybrid.Entry{ID: int64(m.ID), Scope: Scope(user), Text: texts[j], Vector: vecs[j]}); err != nil {
			_ = s.client.Memory.DeleteOneID(m.ID).Exec(sys)
			return nil, err
		}
		out.Stored = append(out.Stored, Stored{ID: m.ID, Text: m.Text})
	}
	slices.SortFunc(out.Failures, func(a, b schematype.ItemFailure) int { return a.Item - b.Item })
	return out, nil
}

func hasKey(m map[string]int, k string) bool {
	_, ok := m[k]
	return ok
}

// CheckSearch refuses queries and maxResults outside the limits.
func CheckSearch(queries []string, maxResults *int) error {
	return tools.SearchLimits{Queries: MaxQueries, QueryChars: MaxQueryChars, MaxResults: MaxMaxResults}.Check(queries, maxResults)
}

// Search finds user's memories: all queries embedded in one request, run
// concurrently, answered in order; a query that could not be embedded is an
// OUTAGE, one that matched nothing an ABSENCE.
func (s *Service) Search(ctx context.Context, org, user int, queries []string, maxResults *int) (*SearchResult, error) {
	if s.embedder == nil {
		return nil, ErrNoEmbeddings
	}
	if err := CheckSearch(queries, maxResults); err != nil {
		return nil, err
	}
	limit := DefaultMaxResults
	if maxResults != nil {
		limit = *maxResults
	}
	floor := float32(MinSimilarity)
	if s.embedder.Lexical() {
		floor = MinSimilarityLexical
	}
	texts := make([]string, len(queries))
	for i, q := range queries {
		texts[i] = strings.TrimSpace(q)
	}
	vecs, embedErrs := embed.Batch(ctx, s.embedder, texts)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sys := tenancy.System(ctx)
	found := make([][]hybrid.Hit, len(texts))
	errs := make([]error, len(texts))
	var wg sync.WaitGroup
	for i := range texts {
		if embedErrs[i] != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i], errs[i] = s.store.Search(sys, hybrid.Query{Scopes: []string{Scope(user)}, Text: texts[i],
				Vector: vecs[i], MinSimilarity: floor, Limit: limit})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var ids []int
	for _, hs := range found {
		for _, h := range hs {
			ids = append(ids, int(h.ID))
		}
	}
	rows, err := s.client.Memory.Query().Where(entmemory.IDIn(ids...), entmemory.OrganizationID(org), entmemory.UserID(user)).All(sys)
	if err != nil {
		return nil, fmt.Errorf("load memories: %w", err)
	}
	byID := make(map[int]*ent.Memory, len(rows))
	for _, m := range rows {
		byID[m.ID] = m
	}
	out := &SearchResult{Results: make([]QueryHits, len(queries)), Failures: []schematype.ItemFailure{}}
	for i, q := range queries {
		out.Results[i] = QueryHits{Query: q, Hits: []Hit{}}
		if embedErrs[i] != nil {
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: q, Kind: schematype.FailureOutage,
				Message: "the search did not run: the embedding provider could not be reached (" + embedErrs[i].Error() + ")"})
			continue
		}
		for _, h := range found[i] {
			if m, ok := byID[int(h.ID)]; ok {
				out.Results[i].Hits = append(out.Results[i].Hits, Hit{ID: m.ID, Text: m.Text, CreatedAt: m.CreatedAt.UTC()})
			}
		}
		if len(out.Results[i].Hits) == 0 {
			out.Failures = append(out.Failures, tools.Unmatched(i, q))
		}
	}
	return out, nil
}

// ErrNotFound is the one answer to a memory that is not the caller's:
// another user's and a made-up id read alike.
const notFound = "no such memory"

// Forget deletes the named memories of user of org; an id that is not
// theirs is a failure worded like one that never existed.
func (s *Service) Forget(ctx context.Context, org, user int, ids []int, inputs []string) (*ForgetResult, error) {
	if len(ids) == 0 || len(ids) > MaxForget {
		return nil, tools.Refusef("ids: give 1 to %d ids, not %d", MaxForget, len(ids))
	}
	sys := tenancy.System(ctx)
	out := &ForgetResult{Forgotten: []int{}, Failures: []schematype.ItemFailure{}}
	for i, id := range ids {
		n, err := s.client.Memory.Delete().Where(entmemory.ID(id), entmemory.OrganizationID(org), entmemory.UserID(user)).Exec(sys)
		if err != nil {
			return nil, fmt.Errorf("forget memory: %w", err)
		}
		if n == 0 {
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: inputs[i], Kind: schematype.FailureError, Message: notFound})
			continue
		}
		if err := s.store.Delete(sys, int64(id)); err != nil {
			return nil, err
		}
		out.Forgotten = append(out.Forgotten, id)
	}
	return out, nil
}
