package openai

import (
	"context"
	"errors"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/toolgate/toolgate/runtime/model"
)

// errNoChunks is a 200 answer that held no stream: the server ignored
// "stream": true or does not speak SSE. Retrying would not help.
var errNoChunks = errors.New("the stream carried no chunks; if the server cannot stream, disable streaming")

// completeStream makes one streamed request and puts the answer together.
func (p *Provider) completeStream(ctx context.Context, params sdk.ChatCompletionNewParams) (*model.Response, error) {
	params.StreamOptions.IncludeUsage = sdk.Bool(true)
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	acc := accumulator{model: params.Model}
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
}

// partialCall is a tool call whose fragments are still arriving.
type partialCall struct {
	index   int64
	indexed bool
	id      string
	name    string
	args    strings.Builder
}

func (a *accumulator) add(c sdk.ChatCompletionChunk) {
	a.chunks++
	if c.Model != "" {
		a.model = c.Model
	}
	if c.JSON.Usage.Valid() {
		a.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		a.text.WriteString(ch.Delta.Content)
		a.thinking.WriteString(reasoning(ch.Delta.JSON.ExtraFields))
		for _, d := range ch.Delta.ToolCalls {
			pc := a.callFor(d)
			if d.ID != "" {
				pc.id = d.ID
			}
			// OpenAI sends the name once; some compatible servers repeat it
			// whole in every fragment, and that must not double it.
			if n := d.Function.Name; n != "" && n != pc.name {
				pc.name += n
			}
			pc.args.WriteString(d.Function.Arguments)
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

// callFor finds the call a fragment belongs to: by index when the server
// sends one, else a new id starts a new call and anything else continues
// the last one.
func (a *accumulator) callFor(d sdk.ChatCompletionChunkChoiceDeltaToolCall) *partialCall {
	if d.JSON.Index.Valid() {
		for _, pc := range a.calls {
			if pc.indexed && pc.index == d.Index {
				return pc
			}
		}
		pc := &partialCall{index: d.Index, indexed: true}
		a.calls = append(a.calls, pc)
		return pc
	}
	if n := len(a.calls); n > 0 {
		last := a.calls[n-1]
		if d.ID == "" || last.id == "" || last.id == d.ID {
			return last
		}
	}
	pc := &partialCall{}
	a.calls = append(a.calls, pc)
	return pc
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
