// Package artifact holds the artifact tools: create_artifact,
// rewrite_artifact and update_artifact, which write versioned documents
// (html, svg, markdown) a conversation produces, and the review tools that
// travel with them, inspect_artifact, measure_layout and print_pdf, which
// render a version in a headless browser (package browser).
//
// Every write is a new version; nothing is overwritten. A new version of a
// visual kind (html, svg) is a draft until inspect_artifact has rendered
// it: the portal shows an artifact's latest inspected version, and the
// write's own answer tells the model it saved a draft.
//
// A Store works on one conversation through the caller's ent client; every
// query filters by that conversation, so an artifact of another one is not
// found, like an id of nothing.
package artifact

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	entartifact "github.com/toolgate/toolgate/ent/artifact"
	"github.com/toolgate/toolgate/ent/artifactversion"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/workspace"
)

// The artifacts' limits. Sizes count UTF-8 bytes.
const (
	// MaxContentBytes bounds one version.
	MaxContentBytes = 1 << 20
	// MaxTitleChars bounds a title, in characters.
	MaxTitleChars = 200
	// MaxArtifacts bounds the artifacts of one conversation.
	MaxArtifacts = 100
	// MaxVersions bounds the versions of one artifact.
	MaxVersions = 200
	// MaxEdits is the most replacements one update_artifact call may make.
	MaxEdits = workspace.MaxEdits
)

// Kinds are the kinds of artifact.
var Kinds = []string{string(entartifact.KindHTML), string(entartifact.KindSvg), string(entartifact.KindMarkdown)}

// Visual reports whether a kind is rendered to be seen (html, svg): its
// versions are drafts until inspected.
func Visual(k entartifact.Kind) bool { return k != entartifact.KindMarkdown }

// Store is one conversation's artifacts.
type Store struct {
	client *ent.Client
	conv   int
	now    func() time.Time
	// unreviewed: the server has no browser, so a draft's note cannot
	// point to inspect_artifact.
	unreviewed bool
}

// New returns the artifacts of the conversation. The caller has checked
// that it may reach the conversation, and passes its scoped client: inside
// a mutation, the transaction's, so that a write is all or nothing.
func New(client *ent.Client, conversationID int) *Store {
	return &Store{client: client, conv: conversationID, now: time.Now}
}

// Unreviewed says the server has no browser: drafts stay drafts, and the
// model is told why rather than pointed to a tool it was not offered.
func (s *Store) Unreviewed() *Store {
	s.unreviewed = true
	return s
}

// Saved is what a write answers: the new version, and whether it is a
// draft waiting for inspect_artifact.
type Saved struct {
	ArtifactID int    `json:"artifactId"`
	Title      string `json:"title"`
	Kind       string `json:"kind"`
	Version    int    `json:"version"`
	Chars      int    `json:"chars"`
	// Edits is the number of replacements update_artifact made.
	Edits int `json:"edits,omitempty"`
	// Draft says the version is not shown until inspected.
	Draft bool `json:"draft"`
	// Note tells the model what a draft needs.
	Note string `json:"note,omitempty"`
}

// UnreviewedNote is what a write of a visual version tells the model on
// a server with no browser.
func UnreviewedNote(version int) string {
	return fmt.Sprintf("version %d is an uninspected draft: the person still sees the last inspected version, and "+
		"this server has no browser to inspect it; say so if they ask why it does not show.", version)
}

// DraftNote is what a write of a visual version tells the model.
func DraftNote(version int) string {
	return fmt.Sprintf("version %d is an uninspected draft: the person still sees the last inspected version. "+
		"Call inspect_artifact on it and fix what you see before you say it is done.", version)
}

// DraftSaveRefusal refuses saving a draft (printing it to a file): visual
// files need inspection before saving, so the model is told what to do
// first.
func DraftSaveRefusal(title string, version int) error {
	return tools.Refusef("version %d of %q is an uninspected draft, and visual files need inspection before saving: "+
		"call inspect_artifact on it, fix what you see, then print it", version, title)
}

// DraftDownloadMessage is what the portal's download of a draft version
// is refused with.
func DraftDownloadMessage(version int) string {
	return fmt.Sprintf("version %d is an uninspected draft, and visual files need inspection before saving: "+
		"it downloads once inspect_artifact has rendered it (Artifact.shown is the latest inspected version)", version)
}

// Create writes version 1 of a new artifact.
func (s *Store) Create(ctx context.Context, title, kind, content string) (*Saved, error) {
	title = strings.TrimSpace(title)
	switch n := utf8.RuneCountInString(title); {
	case n == 0:
		return nil, tools.Refusef("title is empty: name the artifact")
	case n > MaxTitleChars:
		return nil, tools.Refusef("title is %d characters: the limit is %d", n, MaxTitleChars)
	case strings.IndexFunc(title, unicode.IsControl) >= 0:
		return nil, tools.Refusef("title has a control character")
	}
	k := entartifact.Kind(kind)
	if err := entartifact.KindValidator(k); err != nil {
		return nil, tools.Refusef("kind %q: give one of %s", kind, strings.Join(Kinds, ", "))
	}
	if err := checkContent(content); err != nil {
		return nil, err
	}
	n, err := s.client.Artifact.Query().Where(entartifact.ConversationID(s.conv)).Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("count artifacts: %w", err)
	}
	if n >= MaxArtifacts {
		return nil, tools.Refusef("the conversation has %d artifacts, the limit: rewrite or update one of them", n)
	}
	a, err := s.client.Artifact.Create().SetConversationID(s.conv).SetTitle(title).SetKind(k).Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("create artifact: %w", err)
	}
	return s.add(ctx, a, content, 0)
}

// Rewrite adds a version that replaces the whole content.
func (s *Store) Rewrite(ctx context.Context, id int, content string) (*Saved, error) {
	if err := checkContent(content); err != nil {
		return nil, err
	}
	a, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.add(ctx, a, content, 0)
}

// Update adds a version made by exact replacements in the latest one, as
// edit_file makes them: each old text must occur exactly once at its turn,
// or nothing is written.
func (s *Store) Update(ctx context.Context, id int, edits []*workspace.EditInput) (*Saved, error) {
	if len(edits) == 0 || len(edits) > MaxEdits {
		return nil, tools.Refusef("edits: give 1 to %d edits per call, not %d", MaxEdits, len(edits))
	}
	a, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	latest, err := s.Version(ctx, a, 0)
	if err != nil {
		return nil, err
	}
	text, err := workspace.ApplyEdits(latest.Content, fmt.Sprintf("version %d", latest.Number), edits)
	if err != nil {
		return nil, err
	}
	if err := checkContent(text); err != nil {
		return nil, err
	}
	return s.add(ctx, a, text, len(edits))
}

// add writes the artifact's next version.
func (s *Store) add(ctx context.Context, a *ent.Artifact, content string, edits int) (*Saved, error) {
	if a.VersionsCount >= MaxVersions {
		return nil, tools.Refusef("artifact %q has %d versions, the limit: create a new artifact", a.Title, a.VersionsCount)
	}
	number := a.VersionsCount + 1
	// The count moves only from the version it expects: of two writes
	// racing on one artifact, the second finds nothing to update and is
	// told to try again, where a unique index would fail it obscurely.
	n, err := s.client.Artifact.Update().
		Where(entartifact.ID(a.ID), entartifact.VersionsCount(a.VersionsCount)).
		SetVersionsCount(number).
		Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("count version: %w", err)
	}
	if n == 0 {
		return nil, tools.Refusef("artifact %q changed while this call ran: read it again and retry", a.Title)
	}
	chars := utf8.RuneCountInString(content)
	err = s.client.ArtifactVersion.Create().
		SetArtifactID(a.ID).SetConversationID(s.conv).SetNumber(number).
		SetContent(content).SetChars(int64(chars)).SetCreatedAt(s.now()).
		Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("save version: %w", err)
	}
	out := &Saved{ArtifactID: a.ID, Title: a.Title, Kind: string(a.Kind), Version: number, Chars: chars, Edits: edits}
	if Visual(a.Kind) {
		out.Draft, out.Note = true, DraftNote(number)
		if s.unreviewed {
			out.Note = UnreviewedNote(number)
		}
	}
	return out, nil
}

// Get loads one artifact of the conversation; another's, or none, is not
// found in the same words.
func (s *Store) Get(ctx context.Context, id int) (*ent.Artifact, error) {
	a, err := s.client.Artifact.Query().Where(entartifact.ID(id), entartifact.ConversationID(s.conv)).Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("load artifact: %w", err)
	}
	return a, nil
}

// Version loads version number of a (0: the latest).
func (s *Store) Version(ctx context.Context, a *ent.Artifact, number int) (*ent.ArtifactVersion, error) {
	if number < 0 || number > a.VersionsCount {
		return nil, tools.Refusef("artifact %q has versions 1 to %d, not %d", a.Title, a.VersionsCount, number)
	}
	if number == 0 {
		number = a.VersionsCount
	}
	v, err := s.client.ArtifactVersion.Query().
		Where(artifactversion.ArtifactID(a.ID), artifactversion.ConversationID(s.conv), artifactversion.Number(number)).
		Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("load version: %w", err)
	}
	return v, nil
}

// MarkInspected records that inspect_artifact rendered the version: from
// now on the portal shows it.
func (s *Store) MarkInspected(ctx context.Context, v *ent.ArtifactVersion) error {
	if v.Inspected {
		return nil
	}
	if err := s.client.ArtifactVersion.UpdateOneID(v.ID).SetInspected(true).Exec(ctx); err != nil {
		return fmt.Errorf("mark inspected: %w", err)
	}
	v.Inspected = true
	return nil
}

// List returns the conversation's artifacts, oldest first, each with its
// versions in order.
func (s *Store) List(ctx context.Context) ([]*ent.Artifact, error) {
	out, err := s.client.Artifact.Query().
		Where(entartifact.ConversationID(s.conv)).
		WithVersions(func(q *ent.ArtifactVersionQuery) { q.Order(ent.Asc(artifactversion.FieldNumber)) }).
		Order(ent.Asc(entartifact.FieldID)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	return out, nil
}

// Shown returns the version the portal shows: the latest inspected one of
// a visual artifact, the latest of a Markdown one; nil when there is none
// yet. versions are in order.
func Shown(a *ent.Artifact, versions []*ent.ArtifactVersion) *ent.ArtifactVersion {
	for i := len(versions) - 1; i >= 0; i-- {
		if !Visual(a.Kind) || versions[i].Inspected {
			return versions[i]
		}
	}
	return nil
}

// Draft reports whether a version is a draft: of a visual kind and not
// inspected.
func Draft(kind entartifact.Kind, v *ent.ArtifactVersion) bool { return Visual(kind) && !v.Inspected }

// checkContent refuses content a version cannot hold.
func checkContent(content string) error {
	switch {
	case strings.TrimSpace(content) == "":
		return tools.Refusef("content is empty")
	case !utf8.ValidString(content):
		return tools.Refusef("content is not valid UTF-8")
	case strings.IndexByte(content, 0) >= 0:
		return tools.Refusef("content has a NUL character")
	case len(content) > MaxContentBytes:
		return tools.Refusef("content is %d bytes: a version holds at most %d", len(content), MaxContentBytes)
	}
	return nil
}
