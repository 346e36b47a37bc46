package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/tools"
)

// TestResolverTransientFailuresRetriedByEffect: a resolver answering 200
// with INTERNAL or TIMEOUT (a busy database, a deadline) is retried like a
// 503 when the call reads; a write is not repeated, and since its
// transaction rolled back it changed nothing: an outage, not "may have run".
func TestResolverTransientFailuresRetriedByEffect(t *testing.T) {
	t.Parallel()
	busy := ok(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}],"data":{"find":null}}`)
	late := ok(`{"errors":[{"message":"request cancelled or timed out","extensions":{"code":"TIMEOUT"}}],"data":null}`)
	hit := ok(`{"data":{"find":{"hits":["a"]}}}`)
	tests := []struct {
		name         string
		effect       tools.Effect
		replies      []reply
		wantOutcome  schematype.Outcome
		wantAttempts int
	}{
		{"read retried past INTERNAL", tools.EffectRead, []reply{busy, hit}, schematype.OutcomeHits, 2},
		{"read retried past TIMEOUT", tools.EffectRead, []reply{late, late, hit}, schematype.OutcomeHits, 3},
		{"idempotent retried", tools.EffectIdempotent, []reply{busy, hit}, schematype.OutcomeHits, 2},
		{"read gives up", tools.EffectRead, []reply{busy}, schematype.OutcomeOutage, 4},
		{"write not repeated, nothing kept", tools.EffectWrite, []reply{busy, hit}, schematype.OutcomeOutage, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, tt.replies...)
			d, _ := setup(t, b.srv.URL)
			res := d.Do(context.Background(), scope(def("find", tt.effect)), dispatch.Call{ID: "c", Name: "find", Arguments: json.RawMessage(`{"queries":["a"]}`)})
			require.Equal(t, tt.wantOutcome, res.Outcome, res.Message)
			require.Equal(t, tt.wantAttempts, res.Attempts)
		})
	}
}

// TestResolverOwnAttemptsAndOutcomes: a resolver that retried its own
// backend says so in the "attempts" extension, and the call reports those
// attempts (after its own); a resolver answering OUTAGE or ABSENCE makes
// the call an outage or an absence, not repeated here.
func TestResolverOwnAttemptsAndOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		replies      []reply
		wantOutcome  schematype.Outcome
		wantAttempts int
		wantHeard    string
	}{
		{"hits after the backend's retries", []reply{ok(`{"data":{"find":{"hits":["a"]}},"extensions":{"attempts":3}}`)},
			schematype.OutcomeHits, 3, `{"hits":["a"]}` + "\n[answered after 3 attempts]"},
		{"after a retry here too", []reply{status(503), ok(`{"data":{"find":{"hits":["a"]}},"extensions":{"attempts":2}}`)},
			schematype.OutcomeHits, 3, `{"hits":["a"]}` + "\n[answered after 3 attempts]"},
		{"items that never ran", []reply{ok(`{"data":{"find":{"hits":[],"failures":[{"item":0,"input":"a","kind":"OUTAGE","message":"down"}]}},"extensions":{"attempts":4}}`)},
			schematype.OutcomeOutage, 4, "No item gave hits.\nPer item:\n- #0 (a): outage: it never ran (down); try it again later\n[gave up after 4 attempts]"},
		{"outage", []reply{ok(`{"errors":[{"message":"x: site unavailable (HTTP 503)","extensions":{"code":"OUTAGE"}}],"data":null,"extensions":{"attempts":4}}`)},
			schematype.OutcomeOutage, 4, "Outage: the tool never ran (x: site unavailable (HTTP 503), after 4 attempts); nothing was done. Try again later or go on without it."},
		{"absence", []reply{ok(`{"errors":[{"message":"x: page not found (HTTP 404)","extensions":{"code":"ABSENCE"}}],"data":null}`)},
			schematype.OutcomeAbsence, 1, "No match: the tool ran and found nothing (x: page not found (HTTP 404))."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, tt.replies...)
			d, _ := setup(t, b.srv.URL)
			find := def("find", tools.EffectRead)
			res := d.Do(context.Background(), scope(find), dispatch.Call{ID: "c", Name: "find", Arguments: json.RawMessage(`{"queries":["a"]}`)})
			require.Equal(t, tt.wantOutcome, res.Outcome, res.Message)
			require.Equal(t, tt.wantAttempts, res.Attempts)
			require.Len(t, b.got, len(tt.replies), "an outage the resolver answered is not repeated")
			h, err := dispatch.Render(res, find, "r_1", false)
			require.NoError(t, err)
			require.Equal(t, tt.wantHeard, h.Text)
		})
	}
}

// TestRenderOutcomeWords holds each outcome's words: what the model reads
// must say what happened, per item, with the attempts whenever more than one.
func TestRenderOutcomeWords(t *testing.T) {
	t.Parallel()
	d := def("find", tools.EffectRead)
	mixed := dispatch.Result{Outcome: schematype.OutcomeHits, Attempts: 1, Kind: schematype.KindJSON,
		Content: []byte(`{"hits":[{"query":"ada","rows":["Ada Lovelace"]}]}`),
		Failures: []schematype.ItemFailure{
			{Item: 1, Input: "bob", Kind: schematype.FailureAbsence, Message: "no rows"},
			{Item: 2, Input: "eve", Kind: schematype.FailureOutage, Message: "index unavailable"},
		}}
	tests := []struct {
		name string
		give dispatch.Result
		want string
	}{
		{"mixed batch: hit, absence, outage", mixed,
			`{"hits":[{"query":"ada","rows":["Ada Lovelace"]}]}` + "\nThe other items gave no hits:" +
				"\n- #1 (bob): no match: it ran and found nothing (no rows)" +
				"\n- #2 (eve): outage: it never ran (index unavailable); try it again later"},
		{"no item ran", dispatch.Result{Outcome: schematype.OutcomeOutage, Attempts: 1, Failures: []schematype.ItemFailure{
			{Item: 0, Input: "a", Kind: schematype.FailureOutage, Message: "index down"},
			{Item: 1, Input: "b", Kind: schematype.FailureOutage, Message: "index down"}}},
			"No item gave hits.\nPer item:" +
				"\n- #0 (a): outage: it never ran (index down); try it again later" +
				"\n- #1 (b): outage: it never ran (index down); try it again later"},
		{"refused item", dispatch.Result{Outcome: schematype.OutcomeRefused, Attempts: 1, Failures: []schematype.ItemFailure{
			{Item: 0, Input: "r_x", Kind: schematype.FailureRefused, Message: `ref "r_x" not found`}}},
			"No item gave hits.\nPer item:\n- #0 (r_x): refused, nothing ran (ref \"r_x\" not found)"},
		{"refusal", dispatch.Result{Outcome: schematype.OutcomeRefused, Attempts: 1, Message: "maxChars: at most 20000"},
			"Refused: nothing ran. Why: maxChars: at most 20000"},
		{"never reached", dispatch.Result{Outcome: schematype.OutcomeOutage, Attempts: 4, Message: "connection refused"},
			"Outage: the tool never ran (connection refused, after 4 attempts); nothing was done. Try again later or go on without it."},
		{"write may have run", dispatch.Result{Outcome: schematype.OutcomeMayHaveRun, Attempts: 1, Reached: true, Message: "503 Service Unavailable"},
			"May or may not have run: the request reached the tool but no answer came back (503 Service Unavailable, after 1 attempt). It may have changed something: check before repeating it."},
		{"hits after retries", dispatch.Result{Outcome: schematype.OutcomeHits, Attempts: 3, Kind: schematype.KindText, Content: []byte("found")},
			"found\n[answered after 3 attempts]"},
		{"absence after retries", dispatch.Result{Outcome: schematype.OutcomeAbsence, Attempts: 2},
			"No match: the tool ran and found nothing.\n[answered after 2 attempts]"},
		{"hits at once", dispatch.Result{Outcome: schematype.OutcomeHits, Attempts: 1, Kind: schematype.KindText, Content: []byte("found")},
			"found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := dispatch.Render(tt.give, d, "r_1", false)
			require.NoError(t, err)
			require.Equal(t, tt.want, h.Text)
		})
	}
}

// TestMixedBatchOutcome: one hit, one absence, one outage in one call is
// HITS with both failures kept, each with its kind; a failure that names
// no kind reads as ERROR.
func TestMixedBatchOutcome(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"data":{"find":{"hits":["ada"],"failures":[`+
		`{"item":1,"input":"bob","kind":"ABSENCE","message":"no rows"},`+
		`{"item":2,"input":"eve","kind":"OUTAGE","message":"index down"},`+
		`{"item":3,"input":"zed","message":"boom"}]}}}`))
	d, _ := setup(t, b.srv.URL)
	res := d.Do(context.Background(), scope(def("find", tools.EffectRead)), dispatch.Call{ID: "c", Name: "find", Arguments: json.RawMessage(`{"queries":["ada","bob","eve","zed"]}`)})
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	kinds := []schematype.FailureKind{}
	for _, f := range res.Failures {
		kinds = append(kinds, f.Kind)
	}
	require.Equal(t, []schematype.FailureKind{schematype.FailureAbsence, schematype.FailureOutage, schematype.FailureError}, kinds)
}

// TestTextThatIsJSONIsJSON: a resolver (or an MCP tool) answering JSON as
// text is stored and previewed as JSON, not as a string of escaped JSON.
func TestTextThatIsJSONIsJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want schematype.ResultKind
	}{
		{"object as text", `{"data":{"find":"{\"rows\":[1,2]}"}}`, schematype.KindJSON},
		{"array as text", `{"data":{"find":" [1, 2] "}}`, schematype.KindJSON},
		{"plain text", `{"data":{"find":"rows: 1, 2"}}`, schematype.KindText},
		{"broken JSON stays text", `{"data":{"find":"{\"rows\":"}}`, schematype.KindText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, ok(tt.give))
			d, _ := setup(t, b.srv.URL)
			res := d.Do(context.Background(), scope(def("find", tools.EffectRead)), dispatch.Call{ID: "c", Name: "find", Arguments: json.RawMessage(`{"queries":["a"]}`)})
			require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
			require.Equal(t, tt.want, res.Kind)
		})
	}
}
