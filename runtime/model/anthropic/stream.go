package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/toolgate/toolgate/runtime/model"
)

// maxPlainAnswer bounds the body of a plain JSON answer to a streamed
// request (a compatible server that does not stream).
const maxPlainAnswer = 64 << 20

// completeStream makes one streamed request, telling out the text and each
// tool call as they come, and puts the message together with the SDK's
// own accumulator. A server that answers with one JSON message instead of
// a stream is read as such.
func (p *Provider) completeStream(ctx context.Context, params sdk.MessageNewParams, out *model.Attempts) (*model.Response, error) {
	var res *http.Response
	_, err := p.client.Messages.New(ctx, params, option.WithJSONSet("stream", true), option.WithResponseBodyInto(&res))
	if err == nil && res != nil {
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
			defer func() { _ = res.Body.Close() }()
			body, err := io.ReadAll(io.LimitReader(res.Body, maxPlainAnswer))
			if err != nil {
				return nil, err
			}
			var msg sdk.Message
			if err := json.Unmarshal(body, &msg); err != nil {
				return nil, fmt.Errorf("read answer: %w", err)
			}
			out.Text(textOf(&msg))
			return response(&msg, string(params.Model)), nil
		}
	}
	stream := ssestream.NewStream[sdk.MessageStreamEventUnion](ssestream.NewDecoder(res), err)
	defer func() { _ = stream.Close() }()
	var msg sdk.Message
	// calls maps a content block's index to its place among the tool calls.
	calls := map[int64]int{}
	chars := map[int64]int{}
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, fmt.Errorf("read stream: %w", err)
		}
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				calls[ev.Index] = len(calls)
				out.ToolCall(calls[ev.Index], ev.ContentBlock.Name)
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				out.Text(ev.Delta.Text)
			case "input_json_delta":
				if i, ok := calls[ev.Index]; ok {
					chars[ev.Index] += utf8.RuneCountInString(ev.Delta.PartialJSON)
					out.ToolArguments(i, chars[ev.Index])
				}
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if !stopped {
		if msg.ID == "" && len(msg.Content) == 0 {
			return nil, errNoEvents
		}
		// The connection dropped mid-answer; the whole call is tried again.
		return nil, model.ErrTruncated
	}
	return response(&msg, string(params.Model)), nil
}

// errNoEvents is a 200 answer that held no stream.
var errNoEvents = errors.New("the stream carried no events; if the server cannot stream, disable streaming")

// textOf is a message's text blocks, joined.
func textOf(m *sdk.Message) string {
	var s string
	for _, b := range m.Content {
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}
