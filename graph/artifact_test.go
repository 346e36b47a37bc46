package graph_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/artifactversion"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools/artifact"
)

const artifactsQuery = `query($c: ID!) { artifacts(conversationId: $c) {
  id title kind versions { number content chars inspected } shown { number } } }`

// portal fetches a rendered version as the portal does.
func (b *testBundle) portal(t testing.TB, token, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header, string(body)
}

func TestArtifactVersions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		tok := b.alice.Token
		conv := b.startConversation(t, tok, b.createAgent(t, tok, "Designer"), "deck")

		created := b.wsCall(t, tok, artifact.CreateArtifact, conv, map[string]any{
			"title": "Plan", "kind": "html", "content": "<section><h1>One</h1></section><section><h1>Two</h1></section>",
		}).ok(t)
		saved := get(created, "createArtifact").(map[string]any)
		id := saved["artifactId"].(string)
		require.Equal(t, 1.0, saved["version"])
		require.Equal(t, true, saved["draft"], "a new html version is a draft")
		require.Equal(t, artifact.UnreviewedNote(1), saved["note"], "the tool result says so (with no browser, in words that name none)")

		// Each old must match exactly once; one that does not refuses the
		// whole update and writes no version.
		bad := b.wsCall(t, tok, artifact.UpdateArtifact, conv, wsArgs(t, `{"artifactId": "`+id+`", "edits": [
			{"old": "One", "new": "First"}, {"old": "<h1>", "new": "<h2>"}]}`))
		wsRefused(t, bad, "occurs 2 times")
		missing := b.wsCall(t, tok, artifact.UpdateArtifact, conv, wsArgs(t, `{"artifactId": "`+id+`", "edits": [
			{"old": "One", "new": "First"}, {"old": "Three", "new": "3"}]}`))
		wsRefused(t, missing, "not found in \"version 1\" (after the edits before it)")

		up := b.wsCall(t, tok, artifact.UpdateArtifact, conv, wsArgs(t, `{"artifactId": "`+id+`", "edits": [
			{"old": "One", "new": "First"}, {"old": "Two", "new": "Second"}]}`)).ok(t)
		require.Equal(t, 2.0, get(up, "updateArtifact", "version"))
		require.Equal(t, 2.0, get(up, "updateArtifact", "edits"))
		re := b.wsCall(t, tok, artifact.RewriteArtifact, conv, map[string]any{"artifactId": id, "content": "<p>Whole</p>"}).ok(t)
		require.Equal(t, 3.0, get(re, "rewriteArtifact", "version"))

		md := b.wsCall(t, tok, artifact.CreateArtifact, conv, map[string]any{"title": "Notes", "kind": "markdown", "content": "# Notes"}).ok(t)
		require.Equal(t, false, get(md, "createArtifact", "draft"), "markdown needs no inspection")
		require.Empty(t, get(md, "createArtifact", "note"))

		kind := b.wsCall(t, tok, artifact.CreateArtifact, conv, map[string]any{"title": "X", "kind": "pdf", "content": "x"})
		wsRefused(t, kind, "give one of html, svg, markdown")

		// Every version is kept; none is shown until one is inspected.
		list := get(b.do(t, tok, artifactsQuery, map[string]any{"c": conv}).ok(t), "artifacts").([]any)
		require.Len(t, list, 2)
		require.Equal(t, "HTML", get(list[0], "kind"))
		require.Equal(t, []any{
			map[string]any{"number": 1.0, "content": "<section><h1>One</h1></section><section><h1>Two</h1></section>", "chars": 62.0, "inspected": false},
			map[string]any{"number": 2.0, "content": "<section><h1>First</h1></section><section><h1>Second</h1></section>", "chars": 67.0, "inspected": false},
			map[string]any{"number": 3.0, "content": "<p>Whole</p>", "chars": 12.0, "inspected": false},
		}, get(list[0], "versions"))
		require.Nil(t, get(list[0], "shown"))
		require.Equal(t, 1.0, get(list[1], "shown", "number"))

		// Once version 2 is inspected it is what the portal shows, though 3 is newer.
		artifactID, err := gid.Decode(id)
		require.NoError(t, err)
		ctx := tenancy.System(context.Background())
		b.client.ArtifactVersion.Update().Where(artifactversion.ArtifactID(artifactID), artifactversion.Number(2)).
			SetInspected(true).ExecX(ctx)
		list = get(b.do(t, tok, artifactsQuery, map[string]any{"c": conv}).ok(t), "artifacts").([]any)
		require.Equal(t, 2.0, get(list[0], "shown", "number"))

		// The portal route serves a version under a strict policy.
		status, h, body := b.portal(t, tok, "/artifacts/"+id+"/versions/2")
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, "<section><h1>First</h1></section><section><h1>Second</h1></section>", body)
		require.Equal(t, "text/html; charset=utf-8", h.Get("Content-Type"))
		require.Equal(t, graph.ArtifactCSP, h.Get("Content-Security-Policy"))
		require.Contains(t, h.Get("Content-Security-Policy"), "sandbox")
		require.Contains(t, h.Get("Content-Security-Policy"), "connect-src 'none'")
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))

		status, _, _ = b.portal(t, "", "/artifacts/"+id+"/versions/2")
		require.Equal(t, http.StatusUnauthorized, status)

		// Visual files need inspection before saving: the portal's
		// download of a draft (version 3) is refused with what to do, a
		// Markdown version (never a draft) serves, and a draft out of the
		// caller's reach is not found like anything else.
		status, h, body = b.portal(t, tok, "/artifacts/"+id+"/versions/3")
		require.Equal(t, http.StatusConflict, status, body)
		require.Equal(t, "application/json", h.Get("Content-Type"))
		require.JSONEq(t, `{"errors":[{"message":"version 3 is an uninspected draft, and visual files need inspection before saving: `+
			`it downloads once inspect_artifact has rendered it (Artifact.shown is the latest inspected version)","extensions":{"code":"DRAFT"}}]}`, body)
		require.NotContains(t, body, "Whole", "nothing of the draft")
		req, err := http.NewRequest(http.MethodHead, b.srv.URL+"/artifacts/"+id+"/versions/1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.Equal(t, http.StatusConflict, res.StatusCode, "HEAD of a draft too")
		status, _, body = b.portal(t, tok, "/artifacts/"+get(list[1], "id").(string)+"/versions/1")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "# Notes", body)

		// Another organisation, a colleague, a scope token, a made-up id, a
		// version that does not exist: the same answer.
		nStatus, _, nothing := b.portal(t, tok, "/artifacts/"+graph.EncodeID(1<<40+3)+"/versions/1")
		require.Equal(t, http.StatusNotFound, nStatus)
		require.JSONEq(t, `{"errors":[{"message":"not found","extensions":{"code":"NOT_FOUND"}}]}`, nothing)
		for _, tt := range []struct{ give, token, path string }{
			{"other organisation", b.eve.Token, "/artifacts/" + id + "/versions/2"},
			{"another's draft", b.eve.Token, "/artifacts/" + id + "/versions/3"},
			{"colleague", b.bob.Token, "/artifacts/" + id + "/versions/2"},
			{"scope token", b.scopeToken(t, conv, "create_artifact"), "/artifacts/" + id + "/versions/2"},
			{"no such version", tok, "/artifacts/" + id + "/versions/9"},
			{"malformed", tok, "/artifacts/nonsense/versions/x"},
		} {
			status, _, body := b.portal(t, tt.token, tt.path)
			require.Equal(t, nStatus, status, tt.give)
			require.Equal(t, nothing, body, tt.give)
		}
	})
}

func TestArtifactScope(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agent := b.createAgent(t, b.alice.Token, "Designer")
		conv := b.startConversation(t, b.alice.Token, agent, "mine")
		other := b.startConversation(t, b.alice.Token, agent, "other")
		writers := []string{"create_artifact", "rewrite_artifact", "update_artifact"}
		foreign := get(b.wsCall(t, b.alice.Token, artifact.CreateArtifact, other, map[string]any{
			"title": "Other's", "kind": "svg", "content": "<svg/>",
		}).ok(t), "createArtifact", "artifactId").(string)

		// A turn's token reaches only its conversation's artifacts: another
		// conversation's id is refused like one of nothing.
		tok := b.scopeToken(t, conv, writers...)
		madeUp := graph.EncodeID(1<<40 + 5)
		for _, tt := range []struct {
			def  string
			args map[string]any
		}{
			{"rewrite", map[string]any{"content": "<svg></svg>"}},
			{"update", wsArgs(t, `{"edits": [{"old": "<svg/>", "new": "<svg></svg>"}]}`)},
		} {
			def := artifact.RewriteArtifact
			if tt.def == "update" {
				def = artifact.UpdateArtifact
			}
			withID := func(id string) map[string]any {
				m := map[string]any{"artifactId": id}
				for k, v := range tt.args {
					m[k] = v
				}
				return m
			}
			nothing := b.wsCall(t, tok, def, nil, withID(madeUp))
			require.Equal(t, "NOT_FOUND", nothing.code(t), tt.def)
			require.Equal(t, string(nothing.Raw), string(b.wsCall(t, tok, def, nil, withID(foreign)).Raw), tt.def)
			require.Equal(t, string(nothing.Raw), string(b.wsCall(t, b.eve.Token, def, other, withID(foreign)).Raw), tt.def)
		}

		// The artifacts query reads the same for another's conversation.
		nothing := b.do(t, b.eve.Token, artifactsQuery, map[string]any{"c": madeUp})
		require.Equal(t, "NOT_FOUND", nothing.code(t))
		require.Equal(t, string(nothing.Raw), string(b.do(t, b.eve.Token, artifactsQuery, map[string]any{"c": other}).Raw))
		require.Equal(t, string(nothing.Raw), string(b.do(t, b.bob.Token, artifactsQuery, map[string]any{"c": other}).Raw))

		list := get(b.do(t, b.alice.Token, artifactsQuery, map[string]any{"c": other}).ok(t), "artifacts").([]any)
		require.Len(t, get(list[0], "versions"), 1, "nothing foreign was written")
	})
}
