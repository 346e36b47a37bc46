package openai

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/model"
)

// imageHistory is a step whose second tool call gave two page images:
// both tool messages, then the next user text.
func imageHistory() model.Request {
	return model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "Check the deck."},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"1+1"}`)},
			{ID: "call_2", Name: "inspect_artifact", Arguments: json.RawMessage(`{"artifactId":"a1"}`)},
		}},
		{Role: model.RoleTool, ToolCallID: "call_1", ToolName: "calculator", Text: "2"},
		{Role: model.RoleTool, ToolCallID: "call_2", ToolName: "inspect_artifact", Text: "2 pages\n[2 image(s), 6 bytes, stored as ref r_1]",
			Images: []model.Image{{MediaType: "image/jpeg", Data: []byte("one")}, {MediaType: "image/png", Data: []byte("two")}}},
		{Role: model.RoleUser, Text: "And?"},
	}}
}

// TestToolImages: Chat Completions tool messages hold text only, so the
// images follow the batch's tool messages in one user message, as data
// URLs, through the real SDK on the wire.
func TestToolImages(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{events: []string{chunk(`{"content":"Fine."}`, "stop")}})
	_, err := b.provider.Complete(t.Context(), imageHistory())
	require.NoError(t, err)
	msgs := b.sent(t, 0)["messages"].([]any)
	require.Len(t, msgs, 6)
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i] = m.(map[string]any)["role"].(string)
	}
	require.Equal(t, []string{"user", "assistant", "tool", "tool", "user", "user"}, roles, "the images come after every tool message of the batch")
	require.Equal(t, "2 pages\n[2 image(s), 6 bytes, stored as ref r_1]", msgs[3].(map[string]any)["content"], "the tool message keeps its text")
	parts := msgs[4].(map[string]any)["content"].([]any)
	require.Len(t, parts, 3)
	require.Equal(t, "text", parts[0].(map[string]any)["type"])
	require.Contains(t, parts[0].(map[string]any)["text"], "call_2")
	for i, want := range []string{"data:image/jpeg;base64," + base64.StdEncoding.EncodeToString([]byte("one")),
		"data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("two"))} {
		p := parts[i+1].(map[string]any)
		require.Equal(t, "image_url", p["type"])
		require.Equal(t, want, p["image_url"].(map[string]any)["url"])
	}
	require.Equal(t, "And?", msgs[5].(map[string]any)["content"])
	require.True(t, b.provider.TakesImages(""))
}

// TestToolImagesTextOnly: a model that reads no images gets the tool text
// (its summary and ref) and nothing else.
func TestToolImagesTextOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{TextOnly: true}, reply{events: []string{chunk(`{"content":"Fine."}`, "stop")}})
	_, err := b.provider.Complete(t.Context(), imageHistory())
	require.NoError(t, err)
	msgs := b.sent(t, 0)["messages"].([]any)
	require.Len(t, msgs, 5)
	require.Equal(t, "2 pages\n[2 image(s), 6 bytes, stored as ref r_1]", msgs[3].(map[string]any)["content"])
	require.NotContains(t, string(b.requests[0].body), "image_url")
	require.False(t, b.provider.TakesImages(""))
	require.False(t, model.TakesImages(b.provider, ""))
}
