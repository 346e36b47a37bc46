package graph_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image/jpeg"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledongthuc/pdf"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/workspacefile"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/artifact"
	artifactbrowser "github.com/toolgate/toolgate/tools/artifact/browser"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/workspace"
)

// reviewPool is the one browser of this test binary, started on first
// use: starting Chromium is the slow part.
var reviewPool = sync.OnceValue(func() *artifactbrowser.Pool {
	exe, err := artifactbrowser.Find()
	if err != nil {
		return nil
	}
	return artifactbrowser.New(exe, 2, time.Minute)
})

// needBrowser returns the shared browser, or skips a test that needs one.
func needBrowser(t testing.TB) *artifactbrowser.Pool {
	t.Helper()
	p := reviewPool()
	if p == nil {
		t.Skip("no headless browser: install Chromium (.ci/run does) or set TOOLGATE_BROWSER")
	}
	return p
}

// threeSlides is a deck whose second title is too long for its box.
const threeSlides = `<!doctype html><style>body{margin:0} section{width:1280px;height:720px;box-sizing:border-box;padding:40px}
h1{font:48px sans-serif;width:600px;height:64px;margin:0;white-space:nowrap;overflow:hidden}</style>
<section><h1>Plan</h1></section><section style="background:#c00"><h1>Why</h1></section><section><h1>Next</h1></section>`

var reviewers = []string{"create_artifact", "rewrite_artifact", "update_artifact", "inspect_artifact", "measure_layout", "print_pdf",
	"list_files", "read_file"}

func TestArtifactReview(t *testing.T) {
	t.Parallel()
	pool := needBrowser(t)
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setupWith(t, d, func(c *graph.Config) { c.Browser = pool })
		agent := b.createAgentWith(t, b.alice.Token, "Designer", []any{"create_artifact", "update_artifact"})
		conv := b.startConversation(t, b.alice.Token, agent, "deck")
		tok := b.scopeToken(t, conv, reviewers...)

		saved := get(b.wsCall(t, tok, artifact.CreateArtifact, nil, map[string]any{
			"title": "Plan", "kind": "html", "content": threeSlides}).ok(t), "createArtifact").(map[string]any)
		id := saved["artifactId"].(string)
		require.Equal(t, true, saved["draft"])
		require.Equal(t, artifact.DraftNote(1), saved["note"], "the write's answer tells the model it saved an uninspected draft")
		require.Nil(t, b.shown(t, conv), "a draft is not shown")
		// Visual files need inspection before saving: a draft is not
		// printed, and nothing is written.
		wsRefused(t, b.wsCall(t, tok, artifact.PrintPDF, nil, map[string]any{"artifactId": id, "path": "out/deck.pdf"}),
			`version 1 of "Plan" is an uninspected draft, and visual files need inspection before saving: call inspect_artifact on it`)
		require.Empty(t, b.wsPaths(t, b.alice.Token, conv), "nothing was printed")

		// A 3-slide deck inspects into 3 page images, and the version is
		// then the one shown.
		in := get(b.wsCall(t, tok, artifact.InspectArtifact, nil, map[string]any{"artifactId": id}).ok(t), "inspectArtifact").(map[string]any)
		require.Equal(t, 3.0, in["pages"])
		require.Equal(t, []any{1.0, 2.0, 3.0}, in["shown"])
		images := in["images"].([]any)
		require.Len(t, images, 3)
		for i, img := range images {
			require.Equal(t, float64(i+1), get(img, "page"))
			require.Equal(t, "image/jpeg", get(img, "mimeType"))
			raw, err := base64.StdEncoding.DecodeString(get(img, "data").(string))
			require.NoError(t, err)
			pic, err := jpeg.Decode(bytes.NewReader(raw))
			require.NoError(t, err)
			require.Equal(t, 1280, pic.Bounds().Dx())
			require.Equal(t, 720, pic.Bounds().Dy())
		}
		red, err := base64.StdEncoding.DecodeString(get(images[1], "data").(string))
		require.NoError(t, err)
		pic, err := jpeg.Decode(bytes.NewReader(red))
		require.NoError(t, err)
		r, _, _, _ := pic.At(1200, 700).RGBA()
		require.Greater(t, r>>8, uint32(150), "the second image is the red slide")
		require.Contains(t, in["summary"], "renders to 3 pages")
		require.Contains(t, in["summary"], "Nothing overflows")
		require.Equal(t, 1.0, get(b.shown(t, conv), "number"), "the inspected version is shown")

		// Pages past the count are refused, and a page list past 10 too.
		wsRefused(t, b.wsCall(t, tok, artifact.InspectArtifact, nil, map[string]any{"artifactId": id, "pages": []int{4}}), "has 3 pages")
		wsRefused(t, b.wsCall(t, tok, artifact.InspectArtifact, nil, map[string]any{"artifactId": id,
			"pages": []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}), "at most 10 pages")

		// An overflowing title: the new version is a draft, the inspected
		// one stays shown, and measure_layout finds the title.
		up := get(b.wsCall(t, tok, artifact.UpdateArtifact, nil, wsArgs(t, `{"artifactId": "`+id+`", "edits": [
			{"old": "<h1>Why</h1>", "new": "<h1>Why the quarterly plan needs a much longer title</h1>"}]}`)).ok(t), "updateArtifact")
		require.Equal(t, 2.0, get(up, "version"))
		require.Equal(t, true, get(up, "draft"))
		require.Equal(t, 1.0, get(b.shown(t, conv), "number"), "the portal keeps the last inspected version")
		lay := get(b.wsCall(t, tok, artifact.MeasureLayout, nil, map[string]any{"artifactId": id,
			"selectors": []string{"h1", ".missing", "h1["}}).ok(t), "measureLayout")
		require.Equal(t, 2.0, get(lay, "version"))
		sel := get(lay, "selectors").([]any)
		require.Len(t, sel, 1)
		require.Equal(t, 3.0, get(sel[0], "count"))
		title := get(sel[0], "elements", 1)
		require.Equal(t, 2.0, get(title, "page"))
		require.Greater(t, get(title, "overflowX").(float64), 200.0, "the long title does not fit its 600px box")
		require.Equal(t, 600.0, get(title, "box", "width"))
		require.Equal(t, 0.0, get(sel[0], "elements", 0, "overflowX"))
		require.Equal(t, []any{
			map[string]any{"item": 1.0, "input": ".missing", "kind": "ABSENCE", "message": "no element matches"},
		}, get(lay, "failures").([]any)[:1])
		require.Equal(t, "REFUSED", get(lay, "failures", 1, "kind"))
		in = get(b.wsCall(t, tok, artifact.InspectArtifact, nil, map[string]any{"artifactId": id, "pages": []int{2}}).ok(t), "inspectArtifact").(map[string]any)
		require.Contains(t, in["summary"], "page 2 h1")
		require.Equal(t, 2.0, get(b.shown(t, conv), "number"))

		// print_pdf writes a PDF of one page a slide into the workspace.
		pr := get(b.wsCall(t, tok, artifact.PrintPDF, nil, map[string]any{"artifactId": id, "path": "out/deck.pdf"}).ok(t), "printPdf")
		require.Equal(t, 3.0, get(pr, "pages"))
		require.Equal(t, "out/deck.pdf", get(pr, "path"))
		require.Equal(t, true, get(pr, "created"))
		files := get(b.wsCall(t, tok, workspace.ListFiles, nil, nil).ok(t), "listFiles", "files").([]any)
		require.Len(t, files, 1)
		require.Equal(t, "application/pdf", get(files[0], "mediaType"))
		require.Equal(t, get(pr, "bytes"), get(files[0], "bytes"))
		wsRefused(t, b.wsCall(t, tok, workspace.ReadFile, nil, map[string]any{"path": "out/deck.pdf"}), "is a binary file (application/pdf")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		f := b.client.WorkspaceFile.Query().Where(workspacefile.ConversationID(convID)).OnlyX(tenancy.System(context.Background()))
		doc, err := pdf.NewReader(bytes.NewReader(f.Data), int64(len(f.Data)))
		require.NoError(t, err)
		require.Equal(t, 3, doc.NumPage())
		require.True(t, bytes.HasPrefix(f.Data, []byte("%PDF-")), "kept byte for byte")
		wsRefused(t, b.wsCall(t, tok, artifact.PrintPDF, nil, map[string]any{"artifactId": id, "path": "deck.txt"}), "ending in .pdf")

		// Markdown is not rendered.
		md := get(b.wsCall(t, tok, artifact.CreateArtifact, nil, map[string]any{"title": "Notes", "kind": "markdown", "content": "# N"}).ok(t),
			"createArtifact", "artifactId")
		wsRefused(t, b.wsCall(t, tok, artifact.InspectArtifact, nil, map[string]any{"artifactId": md}), "only html and svg")
	})
}

// shown is the version the portal shows of the conversation's first
// artifact.
func (b *testBundle) shown(t testing.TB, conv string) any {
	t.Helper()
	return get(b.do(t, b.alice.Token, artifactsQuery, map[string]any{"c": conv}).ok(t), "artifacts", 0, "shown")
}

// TestArtifactReviewScope: an artifact of another conversation is refused
// by every review tool exactly like an id of nothing, and nothing of it
// is inspected or printed.
func TestArtifactReviewScope(t *testing.T) {
	t.Parallel()
	pool := needBrowser(t)
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setupWith(t, d, func(c *graph.Config) { c.Browser = pool })
		agent := b.createAgent(t, b.alice.Token, "Designer")
		conv := b.startConversation(t, b.alice.Token, agent, "mine")
		other := b.startConversation(t, b.alice.Token, agent, "other")
		foreign := get(b.wsCall(t, b.alice.Token, artifact.CreateArtifact, other, map[string]any{
			"title": "Other's", "kind": "svg", "content": `<svg width="10" height="10"/>`}).ok(t), "createArtifact", "artifactId").(string)
		tok := b.scopeToken(t, conv, reviewers...)
		madeUp := graph.EncodeID(1<<40 + 7)
		for _, tt := range []struct {
			def  string
			args map[string]any
		}{
			{"inspect", map[string]any{}},
			{"measure", map[string]any{"selectors": []string{"svg"}}},
			{"print", map[string]any{"path": "x.pdf"}},
		} {
			d := map[string]tools.Definition{"inspect": artifact.InspectArtifact, "measure": artifact.MeasureLayout, "print": artifact.PrintPDF}[tt.def]
			with := func(id string) map[string]any {
				m := map[string]any{"artifactId": id}
				for k, v := range tt.args {
					m[k] = v
				}
				return m
			}
			nothing := b.wsCall(t, tok, d, nil, with(madeUp))
			require.Equal(t, "NOT_FOUND", nothing.code(t), tt.def)
			require.Equal(t, string(nothing.Raw), string(b.wsCall(t, tok, d, nil, with(foreign)).Raw), tt.def)
			require.Equal(t, string(nothing.Raw), string(b.wsCall(t, b.eve.Token, d, other, with(foreign)).Raw), tt.def)
		}
		list := get(b.do(t, b.alice.Token, artifactsQuery, map[string]any{"c": other}).ok(t), "artifacts").([]any)
		require.Equal(t, false, get(list[0], "versions", 0, "inspected"), "nothing foreign was inspected")
		require.Empty(t, b.wsPaths(t, b.alice.Token, conv), "nothing was printed")
	})
}

// TestReviewToolsNeedABrowser: without a browser the review tools are not
// offered, the catalogue says why, a draft's note does not point to a tool
// the model was not offered, and a call by hand is refused.
func TestReviewToolsNeedABrowser(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agent := b.createAgentWith(t, b.alice.Token, "Designer", []any{"create_artifact"})
		const q = `query($a: ID) { catalogue(agentId: $a) { browser warnings tools { name offeredWhen offered } } }`
		c := get(b.do(t, b.alice.Token, q, map[string]any{"a": agent}).ok(t), "catalogue")
		require.Nil(t, get(c, "browser"))
		require.Equal(t, []any{catalog.NoReview}, get(c, "warnings"))
		offered := map[string]bool{}
		for _, tool := range get(c, "tools").([]any) {
			if get(tool, "offeredWhen") == "artifact_review" {
				offered[get(tool, "name").(string)] = get(tool, "offered").(bool)
			}
		}
		require.Equal(t, map[string]bool{"inspect_artifact": false, "measure_layout": false, "print_pdf": false}, offered)

		conv := b.startConversation(t, b.alice.Token, agent, "deck")
		saved := get(b.wsCall(t, b.alice.Token, artifact.CreateArtifact, conv, map[string]any{
			"title": "Plan", "kind": "html", "content": threeSlides}).ok(t), "createArtifact")
		require.Equal(t, artifact.UnreviewedNote(1), get(saved, "note"))
		require.NotContains(t, get(saved, "note"), "inspect_artifact")
		wsRefused(t, b.wsCall(t, b.alice.Token, artifact.InspectArtifact, conv, map[string]any{"artifactId": get(saved, "artifactId")}),
			"no headless browser")

		// With one, they travel with the writers, unlisted.
		if pool := reviewPool(); pool != nil {
			b := setupWith(t, d, func(c *graph.Config) { c.Browser = pool })
			agent := b.createAgentWith(t, b.alice.Token, "Designer", []any{"create_artifact"})
			c := get(b.do(t, b.alice.Token, q, map[string]any{"a": agent}).ok(t), "catalogue")
			require.True(t, strings.HasPrefix(get(c, "browser").(string), "chrom"), get(c, "browser"))
			require.Empty(t, get(c, "warnings"))
			for _, tool := range get(c, "tools").([]any) {
				if get(tool, "offeredWhen") == "artifact_review" {
					require.Equal(t, true, get(tool, "offered"), get(tool, "name"))
				}
			}
			plain := b.createAgentWith(t, b.alice.Token, "Plain", []any{"calculator"})
			c = get(b.do(t, b.alice.Token, q, map[string]any{"a": plain}).ok(t), "catalogue")
			for _, tool := range get(c, "tools").([]any) {
				if get(tool, "offeredWhen") == "artifact_review" {
					require.Equal(t, false, get(tool, "offered"), "no writer, no review tools")
				}
			}
		}
	})
}
