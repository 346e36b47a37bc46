package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/toolgate/toolgate/runtime/model"
)

// errNoChunks is a 200 answer that held no stream: the server ignored
// "stream": true or does not speak SSE. Retrying would not help.
var errNoChunks = errors.New("the stream carried no chunks; if the server cannot stream, disable streaming")

// completeStream makes one streamed request and puts the answer together.
// Its text, and each tool call as it begins, are told to out as they come.
func (p *Provider) completeStream(ctx context.Context, body []byte, requested string, out *model.Attempts) (*model.Response, error) {
	// The request NewStreaming sends, its events read into streamChunk
	// rather than the SDK's chunk type.
	var res *http.Response
	_, err := p.client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{}, withBody(body),
		option.WithJSONSet("stream", true), option.WithResponseBodyInto(&res))
	stream := ssestream.NewStream[streamChunk](ssestream.NewDecoder(res), err)
	defer stream.Close()
	acc := accumulator{model: requested, out: out}
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return acc.response()
}

// accumulator puts the first choice of a streamed answer back together.
type accumulator struct {
	chunks   int
	model    string
	text     strings.Builder
	thinking strings.Builder
	calls    []*partialCall
	finish   string
	usage    sdk.CompletionUsage
	out      *model.Attempts
}

// partialCall is a tool call whose fragments are still arriving.
type partialCall struct {
	index   int64
	indexed bool
	id      string
	name    string
	args    strings.Builder
	// chars counts the arguments' characters; told: the call's start was
	// told.
	chars int
	told  bool
}

// streamChunk is what the accumulator reads of a streamed chunk. The SDK's own
// chunk type decodes every field of every chunk, with metadata for each,
// at several times the cost, and a long answer is hundreds of chunks.
type streamChunk struct {
	Model   string               `json:"model"`
	Choices []chunkChoice        `json:"choices"`
	Usage   *sdk.CompletionUsage `json:"usage"`
}

type chunkChoice struct {
	Index        int64      `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason string     `json:"finish_reason"`
}

type chunkDelta struct {
	Content string `json:"content"`
	// ReasoningContent and Reasoning are the thinking text some
	// OpenAI-compatible servers add, under one name or the other.
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

// toolCallDelta is a fragment of a tool call; Index is nil when the
// server sent none.
type toolCallDelta struct {
	Index    *int64 `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// UnmarshalJSON reads a chunk. One holding a value of another type than
// expected (arguments as an object, a number as a string: compatible
// servers vary) is read by the SDK's type, which takes what it can.
func (c *streamChunk) UnmarshalJSON(data []byte) error {
	type plain streamChunk
	if json.Unmarshal(data, (*plain)(c)) == nil {
		return nil
	}
	return c.readSDK(data)
}

// readSDK reads a chunk through the SDK's type.
func (c *streamChunk) readSDK(data []byte) error {
	var full sdk.ChatCompletionChunk
	if err := full.UnmarshalJSON(data); err != nil {
		return err
	}
	*c = streamChunk{Model: full.Model}
	if full.JSON.Usage.Valid() {
		c.Usage = &full.Usage
	}
	for _, ch := range full.Choices {
		d := chunkDelta{Content: ch.Delta.Content}
		if f, ok := ch.Delta.JSON.ExtraFields["reasoning_content"]; ok {
			d.ReasoningContent = json.RawMessage(f.Raw())
		}
		if f, ok := ch.Delta.JSON.ExtraFields["reasoning"]; ok {
			d.Reasoning = json.RawMessage(f.Raw())
		}
		for _, t := range ch.Delta.ToolCalls {
			td := toolCallDelta{ID: t.ID}
			td.Function.Name, td.Function.Arguments = t.Function.Name, t.Function.Arguments
			if t.JSON.Index.Valid() {
				td.Index = &t.Index
			}
			d.ToolCalls = append(d.ToolCalls, td)
		}
		c.Choices = append(c.Choices, chunkChoice{Index: ch.Index, Delta: d, FinishReason: ch.FinishReason})
	}
	return nil
}

func (a *accumulator) add(c streamChunk) {
	a.chunks++
	if c.Model != "" {
		a.model = c.Model
	}
	if c.Usage != nil {
		a.usage = *c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		a.text.WriteString(ch.Delta.Content)
		a.out.Text(ch.Delta.Content)
		a.thinking.WriteString(reasoningText(ch.Delta.ReasoningContent, ch.Delta.Reasoning))
		for _, d := range ch.Delta.ToolCalls {
			pc, i := a.callFor(d)
			if d.ID != "" {
				pc.id = d.ID
			}
			// OpenAI sends the name once; some compatible servers repeat it
			// whole in every fragment, and that must not double it.
			if n := d.Function.Name; n != "" && n != pc.name {
				pc.name += n
			}
			pc.args.WriteString(d.Function.Arguments)
			if pc.name != "" && !pc.told {
				pc.told = true
				a.out.ToolCall(i, pc.name)
			}
			if n := utf8.RuneCountInString(d.Function.Arguments); n > 0 && pc.told {
				pc.chars += n
				a.out.ToolArguments(i, pc.chars)
			}
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

// callFor finds the call a fragment belongs to, and its place among the
// answer's calls: by index when the server sends one, else a new id
// starts a new call and anything else continues the last one.
func (a *accumulator) callFor(d toolCallDelta) (*partialCall, int) {
	if d.Index != nil {
		for i, pc := range a.calls {
			if pc.indexed && pc.index == *d.Index {
				return pc, i
			}
		}
		pc := &partialCall{index: *d.Index, indexed: true}
		a.calls = append(a.calls, pc)
		return pc, len(a.calls) - 1
	}
	if n := len(a.calls); n > 0 {
		last := a.calls[n-1]
		if d.ID == "" || last.id == "" || last.id == d.ID {
			return last, n - 1
		}
	}
	pc := &partialCall{}
	a.calls = append(a.calls, pc)
	return pc, len(a.calls) - 1
}

func (a *accumulator) response() (*model.Response, error) {
	if a.chunks == 0 {
		return nil, errNoChunks
	}
	if a.finish == "" {
		// The connection dropped mid-answer; the whole call is tried again.
		return nil, model.ErrTruncated
	}
	out := &model.Response{
		Model:      a.model,
		Text:       a.text.String(),
		Thinking:   a.thinking.String(),
		StopReason: a.finish,
		Usage:      usage(a.usage),
	}
	for _, pc := range a.calls {
		id := pc.id
		if id == "" {
			id = newCallID()
		}
		out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: id, Name: pc.name, Arguments: arguments(pc.args.String())})
	}
	return out, nil
}
