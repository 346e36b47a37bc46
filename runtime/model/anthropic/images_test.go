package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/model"
)

func imageHistory() model.Request {
	return model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "Check the deck."},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "toolu_1", Name: "inspect_artifact", Arguments: json.RawMessage(`{"artifactId":"a1"}`)},
		}},
		{Role: model.RoleTool, ToolCallID: "toolu_1", ToolName: "inspect_artifact", Text: "2 pages\n[2 image(s), 6 bytes, stored as ref r_1]",
			Images: []model.Image{{MediaType: "image/jpeg", Data: []byte("one")}, {MediaType: "image/png", Data: []byte("two")}}},
	}}
}

// TestToolImages: a tool result's images travel in its tool_result block,
// after its text, base64, through the real SDK on the wire.
func TestToolImages(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, reply{body: textAnswer})
	_, err := b.provider.Complete(t.Context(), imageHistory())
	require.NoError(t, err)
	msgs := b.sent(t, 0)["messages"].([]any)
	require.Len(t, msgs, 3)
	result := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	require.Equal(t, "tool_result", result["type"])
	content := result["content"].([]any)
	require.Len(t, content, 3)
	require.Equal(t, map[string]any{"type": "text", "text": "2 pages\n[2 image(s), 6 bytes, stored as ref r_1]"}, content[0])
	require.Equal(t, map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/jpeg",
		"data": base64.StdEncoding.EncodeToString([]byte("one"))}}, content[1])
	require.Equal(t, "image/png", content[2].(map[string]any)["source"].(map[string]any)["media_type"])
	require.True(t, b.provider.TakesImages(""))
}

// TestToolImagesTextOnly: a model that reads no images gets the text
// alone.
func TestToolImagesTextOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{TextOnly: true}, reply{body: textAnswer})
	_, err := b.provider.Complete(t.Context(), imageHistory())
	require.NoError(t, err)
	msgs := b.sent(t, 0)["messages"].([]any)
	content := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)["content"].([]any)
	require.Len(t, content, 1)
	require.NotContains(t, string(b.requests[0].body), `"image"`)
	require.False(t, model.TakesImages(b.provider, ""))
}
