package repair_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/repair"
)

// TestItemList: the item list is the one required array among the
// top-level arguments, however the schema reaches it; two lists, or one
// the call may leave out, leave no one reading.
func TestItemList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, want string
	}{
		{name: "queries", schema: searchSchema, want: "queries"},
		{name: "files of objects", schema: writeSchema, want: "files"},
		{name: "through $ref", schema: refSchema, want: "files"},
		{name: "draft 7", schema: draft7Schema, want: "names"},
		{name: "two lists", schema: twoListsSchema, want: ""},
		{name: "a list the call may leave out", schema: `{"type":"object","properties":{"pages":{"type":"array","items":{"type":"integer"}},"id":{"type":"string"}},"required":["id"]}`, want: ""},
		{name: "a list or a string", schema: unionSchema, want: ""},
		{name: "no arguments", schema: noArgsSchema, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, compile(t, tt.schema).ItemList())
		})
	}
}

// TestSplit: a call whose only faults lie inside items carries the
// arguments without them, which fit, and each faulted item with its
// problems; repairs apply first. Any other fault leaves it unsplit.
func TestSplit(t *testing.T) {
	t.Parallel()
	tool := compile(t, writeSchema)
	_, repairs, err := tool.Fix(json.RawMessage(`{"files":[{"path":"a.md","content":"A","tags":"x"},{"path":7,"content":"D","size":1},{"path":"c.md","content":"C"}]}`))
	var argErr *repair.ArgumentError
	require.ErrorAs(t, err, &argErr)
	require.Equal(t, []string{"2 files[0].tags"}, brief(repairs))
	s := argErr.Split
	require.NotNil(t, s, argErr.Problems)
	require.Equal(t, "files", s.List)
	require.Equal(t, []int{0, 2}, s.Kept)
	require.JSONEq(t, `{"files":[{"path":"a.md","content":"A","tags":["x"]},{"path":"c.md","content":"C"}]}`, string(s.Rest))
	require.Len(t, s.Faults, 1)
	require.Equal(t, 1, s.Faults[0].Index)
	require.JSONEq(t, `{"path":7,"content":"D","size":1}`, string(s.Faults[0].Item))
	require.Equal(t, []string{`unknown argument "files[1].size" (known: "content", "path", "tags")`,
		`argument "files[1].path": expected a string, got a number`}, s.Faults[0].Problems)
	require.Len(t, argErr.Problems, 2, "the refusal as a whole still names every problem")

	_, _, err = tool.Fix(json.RawMessage(`{"files":[{"path":"b.md"},{"path":"c.md","content":"C"}]}`))
	require.ErrorAs(t, err, &argErr)
	require.NotNil(t, argErr.Split)
	require.Equal(t, []int{1}, argErr.Split.Kept)
	require.Equal(t, []string{`missing required argument "files[0].content"`}, argErr.Split.Faults[0].Problems)

	for _, give := range []string{
		`{"files":[{"path":"a.md","content":"A"},{"path":"b.md"}],"extra":1}`,                                    // the call's own shape
		`{"files":[{"path":"b.md"}]}`,                                                                            // no item left to run
		`{"files":[{"path":"a","content":""},{"path":"b","content":""},{"path":"c","content":""},{"path":"d"}]}`, // too many
	} {
		_, _, err := tool.Fix(json.RawMessage(give))
		require.ErrorAs(t, err, &argErr, give)
		require.Nil(t, argErr.Split, give)
	}
}
