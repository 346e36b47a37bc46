package graph

import (
	"context"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/knowledgebase"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/embed"
)

// DefaultMaxUploadBytes is the default body limit of a multipart upload
// (TOOLGATE_MAX_UPLOAD_BYTES); other requests keep MaxBodyBytes.
const DefaultMaxUploadBytes = 25 << 20

// admin returns the viewer when it holds an admin's API token.
func admin(ctx context.Context) (*auth.Viewer, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() || !v.Admin {
		return nil, auth.ErrForbidden
	}
	return v, nil
}

// upload is a file or a text, ready to store.
type upload struct {
	title, filename, mime, text string
	original                    []byte
}

// readUpload reads a multipart file, or takes a title and text.
func readUpload(file *graphql.Upload, title, text *string) (*upload, error) {
	if file == nil {
		if title == nil || strings.TrimSpace(*title) == "" || text == nil || strings.TrimSpace(*text) == "" {
			return nil, inputErrorf("file, or title and text, is required")
		}
		if !utf8.ValidString(*text) {
			return nil, inputErrorf("text is not valid UTF-8")
		}
		return &upload{title: strings.TrimSpace(*title), mime: document.MIMEText, text: *text}, nil
	}
	data, err := io.ReadAll(file.File)
	if err != nil {
		return nil, inputErrorf("read the uploaded file: %v", err)
	}
	if len(data) == 0 {
		return nil, inputErrorf("the uploaded file %q is empty", file.Filename)
	}
	name := file.Filename
	if len([]rune(name)) > 500 {
		name = string([]rune(name)[:500])
	}
	t := name
	if title != nil && strings.TrimSpace(*title) != "" {
		t = strings.TrimSpace(*title)
	}
	return &upload{title: t, filename: name, mime: document.Detect(name, file.ContentType, data), original: data}, nil
}

// processAfterCommit enqueues a file's processing job once the mutation's
// transaction commits; a lost enqueue is made good when the service opens.
func (r *Resolver) processAfterCommit(ctx context.Context, ref document.Ref) {
	if r.Documents == nil {
		return
	}
	enqueue := func(ctx context.Context) {
		if err := r.Documents.Enqueue(ctx, ref); err != nil {
			r.Log.ErrorContext(ctx, "enqueue document", "ref", ref, "err", err)
		}
	}
	tx := ent.TxFromContext(ctx)
	if tx == nil {
		enqueue(ctx)
		return
	}
	tx.OnCommit(func(next ent.Committer) ent.Committer {
		return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
			if err := next.Commit(ctx, tx); err != nil {
				return err
			}
			enqueue(context.WithoutCancel(ctx))
			return nil
		})
	})
}

// checkKnowledgeBases returns the distinct ids, refusing any the caller's
// organisation does not have, in the same words as an id of nothing.
func (r *Resolver) checkKnowledgeBases(ctx context.Context, ids []int) ([]int, error) {
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	n, err := r.client(ctx).KnowledgeBase.Query().Where(knowledgebase.IDIn(out...)).Count(ctx)
	if err != nil {
		return nil, err
	}
	if n != len(out) {
		return nil, auth.ErrNotFound
	}
	return out, nil
}

// server is what this server offers beside an agent's own rules.
func (r *Resolver) server() offer.Server {
	var e embed.Embedder
	if r.Documents != nil {
		e = r.Documents.Embedder()
	}
	s := offer.Server{WebProvider: r.Web != nil, Embeddings: e != nil, EmbeddingsDown: embed.Down(e), Browser: r.Browser != nil}
	if r.Runner != nil {
		s.Rates = r.Runner.Rates()
	}
	return s
}

// documentReach resolves what a document tool's call may reach: the
// knowledge bases the conversation's agent binds (those still there) and
// the conversation's attachments. Nothing the call names widens it.
func (r *Resolver) documentReach(ctx context.Context, tool string, conversationID *int) (document.Reach, error) {
	conv, err := r.toolConversation(ctx, tool, conversationID)
	if err != nil {
		return document.Reach{}, err
	}
	ag, err := r.Client.Agent.Get(ctx, conv.AgentID)
	if err != nil {
		return document.Reach{}, err
	}
	reach := document.Reach{Conversation: conv.ID}
	if len(ag.KnowledgeBaseIds) > 0 {
		if reach.KnowledgeBases, err = r.Client.KnowledgeBase.Query().Where(knowledgebase.IDIn(ag.KnowledgeBaseIds...)).IDs(ctx); err != nil {
			return document.Reach{}, err
		}
	}
	return reach, nil
}

// errNoDocuments answers a document tool on a server that processes no documents.
var errNoDocuments = inputErrorf("documents are not processed on this server")

func (r *Resolver) knowledgeSearch(ctx context.Context, conversationID *int, queries []string, maxResults *int) (*document.Search, error) {
	reach, err := r.documentReach(ctx, document.KnowledgeSearch.Name, conversationID)
	if err != nil {
		return nil, err
	}
	if r.Documents == nil {
		return nil, errNoDocuments
	}
	if len(reach.KnowledgeBases) == 0 {
		return nil, inputErrorf("the conversation's agent binds no knowledge base")
	}
	scopes := make([]string, len(reach.KnowledgeBases))
	for i, id := range reach.KnowledgeBases {
		scopes[i] = document.KnowledgeScope(id)
	}
	return r.Documents.Search(ctx, r.Client, scopes, queries, maxResults)
}

func (r *Resolver) searchAttachments(ctx context.Context, conversationID *int, queries []string, maxResults *int) (*document.Search, error) {
	reach, err := r.documentReach(ctx, document.SearchAttachments.Name, conversationID)
	if err != nil {
		return nil, err
	}
	if r.Documents == nil {
		return nil, errNoDocuments
	}
	return r.Documents.Search(ctx, r.Client, []string{document.ConversationScope(reach.Conversation)}, queries, maxResults)
}

func (r *Resolver) readDocument(ctx context.Context, conversationID *int, documentID int, offset, maxChars *int) (*document.Read, error) {
	reach, err := r.documentReach(ctx, document.ReadDocument.Name, conversationID)
	if err != nil {
		return nil, err
	}
	return document.ReadText(ctx, r.Client, reach, documentID, offset, maxChars)
}

// embeddingModel names the server's embedding model, labelling the local
// embedder as lexical; nil without one.
func (r *Resolver) embeddingModel() *model.EmbeddingModel {
	if r.Documents == nil || r.Documents.Embedder() == nil {
		return nil
	}
	e := r.Documents.Embedder()
	return &model.EmbeddingModel{Provider: e.Provider(), Model: e.Model(), Lexical: e.Lexical()}
}
