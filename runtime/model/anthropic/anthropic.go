// Package anthropic is the model provider for Anthropic's Messages API,
// through the official anthropic-sdk-go client.
//
// The tools and the system prompt are the stable prefix of every call, so
// both carry a cache breakpoint (cache_control: ephemeral on the last tool
// and on the system block): later calls of the same agent read them from
// the cache. History is mapped faithfully: consecutive tool results (and
// any user text after them) become one user message, tool_result blocks
// first, with is_error set on failures.
//
// A tool result's images travel in its tool_result block, after its text;
// Options.TextOnly, for a model that reads no images, leaves them out (the
// text names their ref).
//
// Answers are streamed (Messages with stream: true, read and put together
// by the SDK): the text and each tool call are told to Request.Stream as
// they arrive, and a long answer stays clear of idle timeouts and of the
// SDK's bound on a plain call's duration. Options.DisableStreaming sends
// plain calls; a server that answers a streamed request with one JSON
// message is read as such.
package anthropic

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/retry"
)

// Name is the provider's configuration name.
const Name = "anthropic"

// DefaultModel is the model asked for when neither the options nor the
// request name one.
const DefaultModel = "claude-sonnet-4-5"

// DefaultMaxTokens caps each answer when neither the options nor the
// request do; the Messages API requires a cap.
const DefaultMaxTokens = 8192

// Options configure a Provider. Zero fields take the defaults.
type Options struct {
	// Model is the default model; a Request's Model wins over it.
	Model string
	// APIKey defaults to the SDK's credentials (ANTHROPIC_API_KEY first).
	APIKey string
	// BaseURL defaults to ANTHROPIC_BASE_URL, read by the SDK, or Anthropic's API.
	BaseURL string
	// MaxTokens caps each answer when the Request does not.
	MaxTokens int
	// HTTPClient defaults to the SDK's.
	HTTPClient *http.Client
	// Retry is the schedule for 429, 5xx, 529 and dropped connections.
	Retry retry.Policy
	// TextOnly says the model reads no images: tool results' images are
	// not sent.
	TextOnly bool
	// DisableStreaming sends one plain request per call.
	DisableStreaming bool
}

// Provider talks to the Messages API. It is safe for concurrent use.
type Provider struct {
	client    sdk.Client
	model     string
	maxTokens int
	retry     retry.Policy
	textOnly  bool
	plain     bool
	decks     model.Deck[[]sdk.ToolUnionParam]
}

var _ model.Provider = (*Provider)(nil)

// New builds a provider. It makes no request.
func New(opts Options) (*Provider, error) {
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: max tokens %d is negative", opts.MaxTokens)
	}
	ropts := []option.RequestOption{
		// Retries are ours, so one schedule with an injectable sleep rules.
		option.WithMaxRetries(0),
		option.WithMiddleware(model.Middleware),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("anthropic: base URL %q is not an absolute URL", opts.BaseURL)
		}
		ropts = append(ropts, option.WithBaseURL(opts.BaseURL))
	}
	if opts.APIKey != "" {
		ropts = append(ropts, option.WithAPIKey(opts.APIKey))
	}
	if opts.HTTPClient != nil {
		ropts = append(ropts, option.WithHTTPClient(opts.HTTPClient))
	}
	p := &Provider{
		client:    sdk.NewClient(ropts...),
		model:     opts.Model,
		maxTokens: opts.MaxTokens,
		retry:     opts.Retry,
		textOnly:  opts.TextOnly,
		plain:     opts.DisableStreaming,
	}
	if p.model == "" {
		p.model = DefaultModel
	}
	if p.maxTokens == 0 {
		p.maxTokens = DefaultMaxTokens
	}
	return p, nil
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// TakesImages reports whether tool results' images are sent: unless the
// provider was set up TextOnly.
func (p *Provider) TakesImages(string) bool { return !p.textOnly }

// Model returns the model asked for when a Request names none.
func (p *Provider) Model() string { return p.model }

// Complete sends req and returns the model's answer, retrying 429, 5xx, 529
// and dropped connections.
func (p *Provider) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	out := model.StreamTo(req.Stream)
	return model.Call(ctx, p.retry, Name, func(ctx context.Context) (*model.Response, error) {
		if !p.plain {
			out.Attempt()
			return p.completeStream(ctx, params, out)
		}
		res, err := p.client.Messages.New(ctx, params)
		if err != nil {
			return nil, err
		}
		return response(res, string(params.Model)), nil
	})
}

// params maps a request to the wire format.
func (p *Provider) params(req model.Request) (sdk.MessageNewParams, error) {
	params := sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: int64(req.MaxTokens),
	}
	if req.Model == "" {
		params.Model = sdk.Model(p.model)
	}
	if req.MaxTokens <= 0 {
		params.MaxTokens = int64(p.maxTokens)
	}
	// Who pays travels beside the prompt, never in it.
	if key := req.Attribution.Key(); key != "" {
		params.Metadata = sdk.MetadataParam{UserID: sdk.String(key)}
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System, CacheControl: sdk.NewCacheControlEphemeralParam()}}
	}
	tools, err := p.decks.Get(req.Tools, encodeDeck)
	if err != nil {
		return params, err
	}
	params.Tools = tools
	msgs, err := messages(req.Messages, !p.textOnly)
	if err != nil {
		return params, err
	}
	params.Messages = msgs
	cacheHistory(msgs)
	return params, nil
}

// cacheHistory sets the third breakpoint, after the last block of the
// history: a turn's next call sends the same history with more after it,
// so it reads all of this from the cache instead of paying for it again.
func cacheHistory(msgs []sdk.MessageParam) {
	if len(msgs) == 0 {
		return
	}
	var blocks []sdk.ContentBlockParamUnion
	switch last := msgs[len(msgs)-1]; {
	case last.OfUser != nil:
		blocks = last.OfUser.Content
	case last.OfAssistant != nil:
		blocks = last.OfAssistant.Content
	}
	if len(blocks) == 0 {
		return
	}
	if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
		*cc = sdk.NewCacheControlEphemeralParam()
	}
}

// encodeDeck encodes each definition through the SDK once, and hands the
// bytes back to it as raw JSON: they are those the SDK would send for the
// definition itself, and a call copies them instead of encoding them again.
func encodeDeck(tools []model.ToolSpec) ([]sdk.ToolUnionParam, error) {
	var out []sdk.ToolUnionParam // no tools: none sent, not an empty list
	for i, t := range tools {
		tool, err := toolParam(t)
		if err != nil {
			return nil, err
		}
		if i == len(tools)-1 {
			// One breakpoint after the last tool caches every definition.
			tool.CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		raw, err := sdk.ToolUnionParam{OfTool: &tool}.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out = append(out, param.Override[sdk.ToolUnionParam](json.RawMessage(raw)))
	}
	return out, nil
}

// toolParam sends the tool's schema byte for byte: the tools are part of
// the cached prefix, and re-encoding could reorder the author's keys.
func toolParam(t model.ToolSpec) (sdk.ToolParam, error) {
	schema := t.Schema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if !json.Valid(schema) {
		return sdk.ToolParam{}, fmt.Errorf("tool %q: schema is not valid JSON", t.Name)
	}
	tool := sdk.ToolParam{
		Name:        t.Name,
		InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
	}
	if t.Description != "" {
		tool.Description = sdk.String(t.Description)
	}
	return tool, nil
}

// userTurn gathers the blocks of one user message: tool results must come
// before any text in it.
type userTurn struct {
	results []sdk.ContentBlockParamUnion
	texts   []sdk.ContentBlockParamUnion
}

func (u *userTurn) flush(msgs []sdk.MessageParam) []sdk.MessageParam {
	if len(u.results)+len(u.texts) == 0 {
		return msgs
	}
	msgs = append(msgs, sdk.NewUserMessage(append(u.results, u.texts...)...))
	*u = userTurn{}
	return msgs
}

// messages maps the history. Consecutive user and tool messages share one
// user message, since the API wants every result of a batch of tool calls
// in the message that follows it.
func messages(history []model.Message, images bool) ([]sdk.MessageParam, error) {
	var msgs []sdk.MessageParam
	var user userTurn
	for i, m := range history {
		switch m.Role {
		case model.RoleUser:
			// The API refuses empty text blocks.
			if m.Text != "" {
				user.texts = append(user.texts, sdk.NewTextBlock(m.Text))
			}
		case model.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool message without a call id", i)
			}
			result := &sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Text != "" {
				result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Text}}}
			}
			if images {
				for _, img := range m.Images {
					block := sdk.NewImageBlockBase64(img.MediaType, base64.StdEncoding.EncodeToString(img.Data))
					result.Content = append(result.Content, sdk.ToolResultBlockParamContentUnion{OfImage: block.OfImage})
				}
			}
			if m.IsError {
				result.IsError = sdk.Bool(true)
			}
			user.results = append(user.results, sdk.ContentBlockParamUnion{OfToolResult: result})
		case model.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, input(c.Arguments), c.Name))
			}
			if len(blocks) == 0 {
				// Nothing to say; an empty assistant message would be refused.
				continue
			}
			msgs = user.flush(msgs)
			msgs = append(msgs, sdk.NewAssistantMessage(blocks...))
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return user.flush(msgs), nil
}

// input is a call's arguments as tool_use input, which must be an object:
// arguments another provider left unparsed are replayed as {}.
func input(args json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(trimmed)
}

// response maps the answer.
func response(res *sdk.Message, requested string) *model.Response {
	out := &model.Response{
		Model:      string(res.Model),
		StopReason: string(res.StopReason),
		Usage: model.Usage{
			InputUncached: res.Usage.InputTokens,
			CacheRead:     res.Usage.CacheReadInputTokens,
			CacheWrite:    res.Usage.CacheCreationInputTokens,
			Output:        res.Usage.OutputTokens,
		},
	}
	if out.Model == "" {
		out.Model = requested
	}
	var text, thinking []string
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "thinking":
			thinking = append(thinking, b.Thinking)
		case "tool_use":
			args := json.RawMessage("{}")
			if len(bytes.TrimSpace(b.Input)) > 0 {
				args = bytes.Clone(b.Input)
			}
			out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Text = strings.Join(text, "")
	out.Thinking = strings.Join(thinking, "\n\n")
	return out
}
