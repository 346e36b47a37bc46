package document

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/attachment"
	"github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/documentchunk"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/embed"
	"github.com/toolgate/toolgate/tools/result"
)

// The limits of the family's tools.
const (
	// MaxQueries is the most distinct queries one search call runs.
	MaxQueries = 5
	// MaxQueryChars bounds one query.
	MaxQueryChars = 400
	// DefaultMaxResults is how many passages each query of knowledge_search
	// and search_attachments returns when not told: more than memory
	// search's default (5), since a passage of a document carries less than
	// a remembered fact.
	DefaultMaxResults = 8
	// MaxMaxResults is the most passages one query may ask for.
	MaxMaxResults = 20
	// ReadDefaultChars and ReadMaxChars are read_document's window.
	ReadDefaultChars = 10_000
	ReadMaxChars     = 40_000
)

// Similarity floors: a vector neighbour below them is no hit, so a query
// about nothing in the documents finds nothing rather than the nearest
// passages. The local embedder's vectors share hashed word parts by chance,
// so its floor is its own.
const (
	MinSimilarity        = 0.3
	MinSimilarityLexical = 0.2
)

// Kinds of per-item failures, the tool rules' one vocabulary.
const (
	KindAbsence = schematype.FailureAbsence
	KindOutage  = schematype.FailureOutage
)

// ErrNoEmbeddings refuses a search on a server with no embedding model.
var ErrNoEmbeddings = tools.Refusef("searching documents needs an embedding model, and this server has none configured")

// Passage is one passage found.
type Passage struct {
	// DocumentID is the document's or the attachment's id: read_document
	// reads on from Position.
	DocumentID int    `json:"documentId"`
	Title      string `json:"title"`
	// Position is the offset, in characters, of the passage in the
	// document's text.
	Position int    `json:"position"`
	Text     string `json:"text"`
}

// QueryHits is one query's passages, best first.
type QueryHits = tools.QueryHits[Passage]

// Search is what knowledge_search and search_attachments return.
type Search struct {
	// Results, one per query, in the order asked.
	Results []QueryHits `json:"results"`
	// Failures: queries that matched nothing (ABSENCE) or never ran
	// (OUTAGE); item is the query's position.
	Failures []schematype.ItemFailure `json:"failures"`
}

// CheckSearch refuses queries and maxResults outside the limits, naming
// them.
func CheckSearch(queries []string, maxResults *int) error {
	return tools.SearchLimits{Queries: MaxQueries, QueryChars: MaxQueryChars, MaxResults: MaxMaxResults}.Check(queries, maxResults)
}

// Search runs queries over the passages of scopes (KnowledgeScope,
// ConversationScope; the caller decides which the turn reaches). All
// queries are embedded in one request; they then run concurrently and are
// answered in order. A query whose embedding failed is an OUTAGE, one
// that ran and matched nothing an ABSENCE; the others keep their hits.
// c is the caller's (scoped) client: passages are read through it.
func (s *Service) Search(ctx context.Context, c *ent.Client, scopes, queries []string, maxResults *int) (*Search, error) {
	if err := CheckSearch(queries, maxResults); err != nil {
		return nil, err
	}
	e := s.cfg.Embedder
	if e == nil {
		return nil, ErrNoEmbeddings
	}
	limit := DefaultMaxResults
	if maxResults != nil {
		limit = *maxResults
	}
	floor := float32(MinSimilarity)
	if e.Lexical() {
		floor = MinSimilarityLexical
	}
	texts := make([]string, len(queries))
	for i, q := range queries {
		texts[i] = strings.TrimSpace(q)
	}
	vecs, embedErrs := embed.Batch(ctx, e, texts)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	hits := make([][]hybrid.Hit, len(texts))
	errs := make([]error, len(texts))
	var wg sync.WaitGroup
	for i := range texts {
		if embedErrs[i] != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			hits[i], errs[i] = s.store.Search(ctx, hybrid.Query{Scopes: scopes, Text: texts[i], Vector: vecs[i], MinSimilarity: floor, Limit: limit})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// The database failed: the whole call fails, and a read is tried again.
		return nil, err
	}
	passages, err := s.passages(ctx, c, hits)
	if err != nil {
		return nil, err
	}
	out := &Search{Results: make([]QueryHits, len(texts)), Failures: []schematype.ItemFailure{}}
	for i, q := range queries {
		out.Results[i] = QueryHits{Query: q, Hits: []Passage{}}
		if embedErrs[i] != nil {
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: q, Kind: KindOutage,
				Message: "the search did not run: the embedding provider could not be reached (" + embedErrs[i].Error() + ")"})
			continue
		}
		for _, h := range hits[i] {
			if p, ok := passages[h.ID]; ok {
				out.Results[i].Hits = append(out.Results[i].Hits, p)
			}
		}
		if len(out.Results[i].Hits) == 0 {
			out.Failures = append(out.Failures, tools.Unmatched(i, q))
		}
	}
	return out, nil
}

// passages reads the chunks hits name, with their documents' titles,
// through c: a hit c cannot see is dropped.
func (s *Service) passages(ctx context.Context, c *ent.Client, hits [][]hybrid.Hit) (map[int64]Passage, error) {
	var ids []int
	for _, hs := range hits {
		for _, h := range hs {
			ids = append(ids, int(h.ID))
		}
	}
	out := map[int64]Passage{}
	if len(ids) == 0 {
		return out, nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	chunks, err := c.DocumentChunk.Query().Where(documentchunk.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load passages: %w", err)
	}
	var docIDs, attIDs []int
	for _, ch := range chunks {
		if ch.DocumentID != nil {
			docIDs = append(docIDs, *ch.DocumentID)
		}
		if ch.AttachmentID != nil {
			attIDs = append(attIDs, *ch.AttachmentID)
		}
	}
	titles := map[int]string{}
	if len(docIDs) > 0 {
		docs, err := c.Document.Query().Where(document.IDIn(docIDs...)).Select(document.FieldTitle).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("load documents: %w", err)
		}
		for _, d := range docs {
			titles[d.ID] = d.Title
		}
	}
	if len(attIDs) > 0 {
		atts, err := c.Attachment.Query().Where(attachment.IDIn(attIDs...)).Select(attachment.FieldTitle).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("load attachments: %w", err)
		}
		for _, a := range atts {
			titles[a.ID] = a.Title
		}
	}
	for _, ch := range chunks {
		owner := 0
		if ch.DocumentID != nil {
			owner = *ch.DocumentID
		} else if ch.AttachmentID != nil {
			owner = *ch.AttachmentID
		}
		title, ok := titles[owner]
		if !ok {
			continue
		}
		out[int64(ch.ID)] = Passage{DocumentID: owner, Title: title, Position: ch.Position, Text: ch.Text}
	}
	return out, nil
}

// Read is one window of a document's or an attachment's text.
type Read struct {
	DocumentID int    `json:"documentId"`
	Title      string `json:"title"`
	Text       string `json:"text"`
	// Offset is where Text starts, in characters.
	Offset int `json:"offset"`
	// TotalChars is the length of the whole text.
	TotalChars int `json:"totalChars"`
	// Truncated: the window stops before the end; NextOffset continues.
	Truncated  bool `json:"truncated"`
	NextOffset *int `json:"nextOffset"`
}

// Reach is what a turn's document tools may reach: the knowledge bases its
// agent binds and the attachments of its conversation.
type Reach struct {
	KnowledgeBases []int
	Conversation   int
}

// CheckRead refuses a window outside read_document's limits.
func CheckRead(offset, maxChars *int) error {
	if offset != nil && *offset < 0 {
		return tools.Refusef("offset must not be negative, not %d", *offset)
	}
	if maxChars != nil && (*maxChars < 1 || *maxChars > ReadMaxChars) {
		return tools.Refusef("maxChars must be between 1 and %d, not %d", ReadMaxChars, *maxChars)
	}
	return nil
}

// ReadText returns a window of the text of document id: a document of
// a knowledge base reach names, or an attachment of reach's conversation.
// Any other id, another organisation's or nothing's, is not found, in the
// same words. c is the caller's (scoped) client.
func ReadText(ctx context.Context, c *ent.Client, reach Reach, id int, offset, maxChars *int) (*Read, error) {
	if err := CheckRead(offset, maxChars); err != nil {
		return nil, err
	}
	var (
		title, text, status string
		reason              *string
	)
	var d *ent.Document
	if len(reach.KnowledgeBases) > 0 {
		var err error
		d, err = c.Document.Query().Where(document.ID(id), document.KnowledgeBaseIDIn(reach.KnowledgeBases...)).Only(ctx)
		if err != nil && !ent.IsNotFound(err) {
			return nil, fmt.Errorf("load document: %w", err)
		}
	}
	if d != nil {
		title, text, status, reason = d.Title, d.Text, string(d.Status), d.Error
	} else {
		a, err := c.Attachment.Query().Where(attachment.ID(id), attachment.ConversationID(reach.Conversation)).Only(ctx)
		if ent.IsNotFound(err) {
			return nil, tenancy.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("load attachment: %w", err)
		}
		title, text, status, reason = a.Title, a.Text, string(a.Status), a.Error
	}
	switch status {
	case string(document.StatusPROCESSING):
		return nil, tools.Refusef("%q is still being processed: read it in a moment", title)
	case string(document.StatusFAILED):
		why := "its text could not be read"
		if reason != nil {
			why = *reason
		}
		return nil, tools.Refusef("%q cannot be read: %s", title, why)
	}
	from, budget := 0, ReadDefaultChars
	if offset != nil {
		from = *offset
	}
	if maxChars != nil {
		budget = *maxChars
	}
	w := result.Window(text, from, budget)
	r := &Read{DocumentID: id, Title: title, Text: w.Text, Offset: w.Offset, TotalChars: w.Total}
	if w.NextOffset >= 0 {
		next := w.NextOffset
		r.Truncated, r.NextOffset = true, &next
	}
	return r, nil
}
