package openai

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/model/modeltest"
)

// The request's Stream hears the text and each tool call as the chunks
// arrive, never the thinking; a retried call restarts it, so what it
// holds is the answer once.
func TestStreamTellsTheAnswer(t *testing.T) {
	t.Parallel()
	cut := reply{cut: true, events: []string{chunk(`{"content":"Half an ans"}`, "")}}
	whole := reply{events: []string{
		chunk(`{"reasoning_content":"secret thoughts"}`, ""),
		chunk(`{"content":"Let me "}`, ""),
		chunk(`{"content":"check. ✓"}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"write_file","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a.txt\","}}]}`, ""),
		chunk(`{}`, "tool_calls"),
	}}
	b := setup(t, Options{}, cut, whole)
	rec := &modeltest.Recorder{}
	req := helloRequest
	req.Stream = rec
	got, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)
	text, calls, args, restarts := rec.Told()
	require.Equal(t, got.Text, text)
	require.Equal(t, "Let me check. ✓", text)
	require.NotContains(t, text, "secret")
	require.Equal(t, []string{"0:write_file"}, calls)
	require.Equal(t, map[int]int{0: len(`{"path":"a.txt",`)}, args)
	require.Equal(t, 1, restarts, "the cut answer was dropped")
}
