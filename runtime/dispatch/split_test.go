package dispatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/tools"
)

// factsSchema is a many-item write: one required list of facts, each a
// short text.
var factsSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"facts":{"type":"array","minItems":1,"maxItems":4,"items":{"type":"object","properties":{` +
	`"text":{"type":"string","minLength":1,"maxLength":10}},"required":["text"],"additionalProperties":false}},` +
	`"note":{"type":"string"}},"required":["facts"],"additionalProperties":false}`)

func factsDef() tools.Definition {
	return tools.Definition{
		Name: "save", Family: "test", Schema: factsSchema, Effect: tools.EffectWrite, Preview: tools.PreviewExempt,
		Operation: `mutation($conversationId: ID, $facts: [FactInput!]!) { save(conversationId: $conversationId, facts: $facts) { stored failures { item input kind message } } }`,
		Field:     "save",
	}
}

// TestItemFaultsFailAlone: an item that does not fit the schema is not
// sent; the others are, and the resolver's own item failures, which count
// the list it got, are told of the list the model sent (indices and the
// "facts[i]" its words name), merged with the refused items in item order,
// in the failures the model reads too.
func TestItemFaultsFailAlone(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"data":{"save":{"stored":["a"],"failures":[`+
		`{"item":1,"input":"a","kind":"ERROR","message":"repeats facts[0] of this call"}]}}}`))
	d, _ := setup(t, b.srv.URL)
	args := `{"facts":[{"text":"a"},{"text":""},{"text":"a"},{"text":"far too long"}]}`
	res := d.Do(context.Background(), scope(factsDef()), dispatch.Call{ID: "c", Name: "save", Arguments: json.RawMessage(args)})

	got := b.requests()
	require.Len(t, got, 1)
	require.Equal(t, []any{map[string]any{"text": "a"}, map[string]any{"text": "a"}}, got[0].vars["facts"], "only the items that fit are sent")
	require.JSONEq(t, args, string(res.Arguments), "recorded as the model sent them")
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	want := []schematype.ItemFailure{
		{Item: 1, Input: `{"text":""}`, Kind: schematype.FailureRefused, Message: `argument "facts[1].text": needs at least 1 character, got 0`},
		{Item: 2, Input: "a", Kind: schematype.FailureError, Message: "repeats facts[0] of this call"},
		{Item: 3, Input: `{"text":"far too long"}`, Kind: schematype.FailureRefused, Message: `argument "facts[3].text": takes at most 10 characters, got 12`},
	}
	require.Equal(t, want, res.Failures)
	var content struct {
		Stored   []string                 `json:"stored"`
		Failures []schematype.ItemFailure `json:"failures"`
	}
	require.NoError(t, json.Unmarshal(res.Content, &content))
	require.Equal(t, want, content.Failures, "the result the model reads says the same")
	require.Equal(t, []string{"a"}, content.Stored)
	require.True(t, strings.HasPrefix(string(res.Content), `{"stored":["a"],"failures":[`), "the result keeps its order: %s", res.Content)

	h, err := dispatch.Render(res, factsDef(), "r_1", false)
	require.NoError(t, err)
	require.Contains(t, h.Text, `- #1 ({"text":""}): refused, nothing ran (argument "facts[1].text": needs at least 1 character, got 0)`)
	require.Contains(t, h.Text, `- #2 (a): error: it ran and failed (repeats facts[0] of this call)`)
	require.NotContains(t, h.Text, "Refused: nothing ran")
}

// TestItemFaultsMapRefusalsBack: a resolver that refuses the call it got
// names an item of the list the model sent.
func TestItemFaultsMapRefusalsBack(t *testing.T) {
	t.Parallel()
	b := newBackend(t, ok(`{"errors":[{"message":"facts[1] repeats facts[0]","extensions":{"code":"BAD_USER_INPUT"}}],"data":{"save":null}}`))
	d, _ := setup(t, b.srv.URL)
	res := d.Do(context.Background(), scope(factsDef()), dispatch.Call{ID: "c", Name: "save",
		Arguments: json.RawMessage(`{"facts":[{"text":""},{"text":"a"},{"text":"a"}]}`)})
	require.Equal(t, schematype.OutcomeRefused, res.Outcome)
	require.Equal(t, "facts[2] repeats facts[1]", res.Message)
	require.Len(t, res.Failures, 1)
	require.Equal(t, 0, res.Failures[0].Item)
	h, err := dispatch.Render(res, factsDef(), "r_1", false)
	require.NoError(t, err)
	require.Contains(t, h.Text, "Refused: nothing ran. Why: facts[2] repeats facts[1]\nPer item:\n- #0")
}

// TestCallShapeStillRefusesTheCall: a fault in the call itself, an item
// fault beside one, every item at fault, too few items left, or a tool
// whose items are all or nothing: the call is refused whole, never sent.
func TestCallShapeStillRefusesTheCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, args, want string
		atomic           bool
	}{
		{name: "too many items", args: `{"facts":[{"text":"a"},{"text":"b"},{"text":"c"},{"text":"d"},{"text":""}]}`, want: `argument "facts": takes at most 4 items, got 5`},
		{name: "unknown argument beside an item fault", args: `{"facts":[{"text":"a"},{"text":""}],"tag":"x"}`, want: `unknown argument "tag"`},
		{name: "a wrong argument beside an item fault", args: `{"facts":[{"text":"a"},{"text":""}],"note":3}`, want: `argument "note": expected a string, got a number`},
		{name: "every item at fault", args: `{"facts":[{"text":""},{"text":"far too long"}]}`, want: `argument "facts[0].text": needs at least 1 character, got 0`},
		{name: "the list itself", args: `{"facts":[]}`, want: `argument "facts": needs at least 1 item, got 0`},
		{name: "all or nothing", args: `{"facts":[{"text":"a"},{"text":""}]}`, want: `argument "facts[1].text": needs at least 1 character, got 0`, atomic: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, ok(`{"data":{"save":{"stored":[],"failures":[]}}}`))
			d, _ := setup(t, b.srv.URL)
			def := factsDef()
			def.Atomic = tt.atomic
			res := d.Do(context.Background(), scope(def), dispatch.Call{ID: "c", Name: "save", Arguments: json.RawMessage(tt.args)})
			require.Equal(t, schematype.OutcomeRefused, res.Outcome)
			require.Contains(t, res.Message, tt.want)
			require.Empty(t, res.Failures)
			require.Empty(t, b.requests(), "nothing is sent")
		})
	}
}

// TestItemFaultsOfARuntimeTool: a tool the runtime carries out gets the
// items that fit, and a text result keeps its words, the refused item
// told beside it.
func TestItemFaultsOfARuntimeTool(t *testing.T) {
	t.Parallel()
	d, _ := setup(t, "http://127.0.0.1:1/graphql")
	var mu sync.Mutex
	var got []json.RawMessage
	d.Builtins["look"] = func(_ context.Context, _ dispatch.Scope, args json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		got = append(got, args)
		mu.Unlock()
		return json.RawMessage(`"looked up alpha and gamma"`), nil
	}
	def := tools.Definition{Name: "look", Family: "test", Effect: tools.EffectRead, Preview: tools.PreviewLarge,
		Schema: json.RawMessage(`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"}}},"required":["names"]}`)}
	res := d.Do(context.Background(), scope(def), dispatch.Call{ID: "c", Name: "look", Arguments: json.RawMessage(`{"names":["alpha","Be ta","gamma"]}`)})
	require.Equal(t, schematype.OutcomeHits, res.Outcome, res.Message)
	require.Len(t, got, 1)
	require.JSONEq(t, `{"names":["alpha","gamma"]}`, string(got[0]))
	require.Equal(t, "looked up alpha and gamma", string(res.Content))
	require.Equal(t, []schematype.ItemFailure{{Item: 1, Input: "Be ta", Kind: schematype.FailureRefused,
		Message: `argument "names[1]": must match the pattern "^[a-z]+$", got "Be ta"`}}, res.Failures)
}
