package replay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/modeltest"
	"github.com/toolgate/toolgate/runtime/model/replay"
)

// The replay provider streams its step's text in pieces, then its tool
// calls, at its pace; a cancelled call stops mid-text.
func TestReplayStreams(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("Ünïcode 🎉 text. ", 10)
	p, err := replay.New(replay.Script{Entries: []replay.Entry{{Steps: []replay.Step{
		{Thinking: "hidden", Text: text, ToolCalls: []replay.ToolCall{{Name: "calculator", Arguments: []byte(`{"expression":"1+1"}`)}}},
	}}}})
	require.NoError(t, err)
	rec := &modeltest.Recorder{}
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}, Stream: rec}
	got, err := p.Complete(t.Context(), req)
	require.NoError(t, err)
	told, calls, args, _ := rec.Told()
	require.Equal(t, got.Text, told)
	require.Equal(t, []string{"0:calculator"}, calls)
	require.Equal(t, map[int]int{0: len(`{"expression":"1+1"}`)}, args)

	paced := p.Paced(5 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	rec = &modeltest.Recorder{}
	req.Stream = rec
	go func() {
		time.Sleep(replay.ThinkPaces*5*time.Millisecond + 30*time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, err = paced.Complete(ctx, req)
	require.GreaterOrEqual(t, time.Since(start), replay.ThinkPaces*5*time.Millisecond, "a moment to think first")
	require.ErrorIs(t, err, context.Canceled)
	told, _, _, _ = rec.Told()
	require.NotEmpty(t, told)
	require.True(t, strings.HasPrefix(text, told))
	require.Less(t, len(told), len(text), "stopped mid-text")
}
