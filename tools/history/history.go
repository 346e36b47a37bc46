// Package history is past-conversation search: the words people wrote in
// their other conversations, found by full-text search (SQLite FTS5,
// PostgreSQL tsvector through ent/hybrid). Only user messages are indexed:
// answers, tool arguments and tool output never are, so they cannot be
// found.
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/pgtext"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/tools"
)

// Family is the family's name in the catalogue.
const Family = "history"

// Index is the search index of user messages, one passage per turn.
const Index = hybrid.IndexTurns

// The limits of search_past_conversations.
const (
	// MaxQueries is the most distinct queries one call runs.
	MaxQueries = 5
	// MaxQueryChars bounds one query.
	MaxQueryChars = 400
	// DefaultMaxResults is how many turns each query returns when not told.
	DefaultMaxResults = 5
	// MaxMaxResults is the most turns one query may ask for.
	MaxMaxResults = 10
	// SnippetChars is about how much of a message a hit shows around the
	// first word it matched.
	SnippetChars = 240
)

// Search is search_past_conversations.
var Search = tools.Definition{
	Name:   "search_past_conversations",
	Brief:  "Search what the person wrote in their other, earlier conversations.",
	Family: Family,
	Description: "Search what the person wrote in their other, earlier conversations (their own messages only: never " +
		"your answers or tool results): up to 5 distinct angles in one call, run at once and answered in order; each " +
		"hit gives conversationId, title, turn, date and a snippet. Use it when they refer to something discussed " +
		"before. Don't use it for this conversation (read_transcript) or for facts about the world.",
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		tools.QueriesSchema(MaxQueries, MaxQueryChars) + `,` +
		`"maxResults":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(MaxMaxResults) + `,"description":"turns per query, default ` + strconv.Itoa(DefaultMaxResults) + `"}},` +
		`"required":["queries"],"additionalProperties":false}`),
	Guidance:    tools.SearchGuidance,
	GuidanceKey: tools.SearchGuidanceKey,
	Offered:     tools.OfferPastConversationsSwitch,
	Effect:      tools.EffectRead,
	Preview:     tools.PreviewLarge,
	Limits: map[string]int{"queries": MaxQueries, "queryChars": MaxQueryChars,
		"defaultMaxResults": DefaultMaxResults, "maxResults": MaxMaxResults},
	Operation: `query($conversationId: ID, $queries: [String!]!, $maxResults: Int) {
  searchPastConversations(conversationId: $conversationId, queries: $queries, maxResults: $maxResults) {
    results { query hits { conversationId title turn date snippet } } failures { item input kind message }
  }
}`,
	Field:  "searchPastConversations",
	Absent: tools.NothingFound("hits"),
}

// Definitions are the family's tools.
var Definitions = []tools.Definition{Search}

// Hit is one turn found.
type Hit struct {
	ConversationID int       `json:"conversationId"`
	Title          string    `json:"title"`
	Turn           int       `json:"turn"`
	Date           time.Time `json:"date"`
	// Snippet is the part of the person's message around what matched.
	Snippet string `json:"snippet"`
}

// QueryHits is one query's turns, best first.
type QueryHits = tools.QueryHits[Hit]

// Result is what search_past_conversations returns.
type Result struct {
	Results []QueryHits `json:"results"`
	// Failures lists the queries that ran and matched nothing (ABSENCE).
	Failures []schematype.ItemFailure `json:"failures"`
}

// Searcher searches the user messages of a database.
type Searcher struct {
	store   *hybrid.Store
	client  *ent.Client
	dialect string
}

// New returns a searcher over d.
func New(d *db.DB) *Searcher {
	return &Searcher{store: hybrid.New(d.SQL, d.Dialect, Index), client: d.Client(), dialect: d.Dialect}
}

// UserScope is the index scope of a user's messages.
func UserScope(user int) string { return fmt.Sprintf("user:%d", user) }

// Check refuses queries and maxResults outside the limits, naming them.
func Check(queries []string, maxResults *int) error {
	return tools.SearchLimits{Queries: MaxQueries, QueryChars: MaxQueryChars, MaxResults: MaxMaxResults}.Check(queries, maxResults)
}

// Search runs queries over what user of org wrote in their conversations
// other than exclude. The user's messages not yet indexed are indexed
// first, so a message sent a moment ago is found. The queries run
// concurrently and are answered in order; one that matched nothing is an
// ABSENCE.
func (s *Searcher) Search(ctx context.Context, org, user, exclude int, queries []string, maxResults *int) (*Result, error) {
	if err := Check(queries, maxResults); err != nil {
		return nil, err
	}
	limit := DefaultMaxResults
	if maxResults != nil {
		limit = *maxResults
	}
	sys := tenancy.System(ctx)
	if _, err := s.store.Fill(sys, `SELECT t.id AS id, 'user:' || c.user_id AS scope, `+pgtext.WordsSQL(s.dialect, "t.user_text")+` AS text
		FROM turns t JOIN conversations c ON c.id = t.conversation_id
		WHERE c.organization_id = ? AND c.user_id = ?`, org, user); err != nil {
		return nil, err
	}
	// The conversation asked from may hold matches too: ask for enough
	// more that they can be passed over.
	current, err := s.client.Turn.Query().Where(turn.ConversationID(exclude)).Count(sys)
	if err != nil {
		return nil, fmt.Errorf("count turns: %w", err)
	}
	ask := limit + min(current, 200)
	found := make([][]hybrid.Hit, len(queries))
	errs := make([]error, len(queries))
	var wg sync.WaitGroup
	for i, q := range queries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i], errs[i] = s.store.Search(sys, hybrid.Query{Scopes: []string{UserScope(user)}, Text: q, Limit: ask})
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
	// Read as the system, with the owner checked again here: a turn
	// scope token reaches only its own conversation.
	rows, err := s.client.Turn.Query().
		Where(turn.IDIn(ids...), turn.ConversationIDNEQ(exclude),
			turn.HasConversationWith(conversation.OrganizationID(org), conversation.UserID(user))).
		WithConversation().All(sys)
	if err != nil {
		return nil, fmt.Errorf("load turns: %w", err)
	}
	byID := make(map[int]*ent.Turn, len(rows))
	for _, t := range rows {
		byID[t.ID] = t
	}
	out := &Result{Results: make([]QueryHits, len(queries)), Failures: []schematype.ItemFailure{}}
	for i, q := range queries {
		out.Results[i] = QueryHits{Query: q, Hits: []Hit{}}
		for _, h := range found[i] {
			t, ok := byID[int(h.ID)]
			if !ok || len(out.Results[i].Hits) == limit {
				continue
			}
			title := ""
			if t.Edges.Conversation.Title != nil {
				title = *t.Edges.Conversation.Title
			}
			out.Results[i].Hits = append(out.Results[i].Hits, Hit{ConversationID: t.ConversationID, Title: title,
				Turn: t.Number, Date: t.StartedAt.UTC(), Snippet: Snippet(t.UserText, q)})
		}
		if len(out.Results[i].Hits) == 0 {
			out.Failures = append(out.Failures, tools.Unmatched(i, q))
		}
	}
	return out, nil
}

// Snippet returns about SnippetChars of text around the first word of
// query it holds (by word start, so a stemmed match is found), or its
// start.
func Snippet(text, query string) string {
	runes := []rune(text)
	if len(runes) <= SnippetChars {
		return text
	}
	lower := []rune(strings.ToLower(text))
	at := -1
	for _, w := range hybrid.Terms(query) {
		stem := []rune(w)
		if len(stem) > 4 {
			stem = stem[:len(stem)-2] // "budgets" finds "budget"
		}
		for i := 0; i+len(stem) <= len(lower); i++ {
			if (i == 0 || !isWord(lower[i-1])) && string(lower[i:i+len(stem)]) == string(stem) {
				if at < 0 || i < at {
					at = i
				}
				break
			}
		}
	}
	start := max(0, at-SnippetChars/3)
	end := min(len(runes), start+SnippetChars)
	start = max(0, end-SnippetChars)
	s := strings.TrimSpace(string(runes[start:end]))
	if start > 0 {
		s = "…" + s
	}
	if end < len(runes) {
		s += "…"
	}
	return s
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
