// Package openai is the model provider for OpenAI Chat Completions, through
// the official openai-go client. Any OpenAI-compatible server works: point
// OPENAI_BASE_URL (or Options.BaseURL) at it.
//
// Answers are streamed by default (stream_options.include_usage asks for the
// usage chunk), which keeps long answers clear of proxy idle timeouts; tool
// call fragments are put back together by index. Options.DisableStreaming
// switches to one plain request for servers that do not stream.
//
// Usage: prompt_tokens includes prompt_tokens_details.cached_tokens (and
// cache_write_tokens where a server reports them), so the uncached input is
// what is left. A reasoning_content (or reasoning) field, which some
// OpenAI-compatible servers add for thinking models, becomes Response.Thinking.
//
// Images: a Chat Completions tool message holds text only, so the images
// of a batch's tool results follow its tool messages in one user message,
// each introduced by the call it came from. Options.TextOnly, for a model
// that reads no images, leaves them out: the tool text names their ref.
package openai

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/retry"
)

// Name is the provider's configuration name.
const Name = "openai"

// DefaultModel is the model asked for when neither the options nor the
// request name one.
const DefaultModel = "gpt-4.1"

// Options configure a Provider. Zero fields take the defaults.
type Options struct {
	// Model is the default model; a Request's Model wins over it.
	Model string
	// APIKey defaults to OPENAI_API_KEY, read by the SDK.
	APIKey string
	// BaseURL defaults to OPENAI_BASE_URL, read by the SDK, or OpenAI's API.
	BaseURL string
	// MaxTokens caps each answer when the Request does not; 0 leaves the
	// server's default.
	MaxTokens int
	// HTTPClient defaults to the SDK's.
	HTTPClient *http.Client
	// Retry is the schedule for 429, 5xx and dropped connections.
	Retry retry.Policy
	// DisableStreaming sends one plain request per call, for servers that
	// cannot stream.
	DisableStreaming bool
	// TextOnly says the model reads no images: tool results' images are
	// not sent.
	TextOnly bool
}

// Provider talks to a Chat Completions endpoint. It is safe for concurrent use.
type Provider struct {
	client    sdk.Client
	model     string
	maxTokens int
	retry     retry.Policy
	stream    bool
	textOnly  bool
	decks     model.Deck[*deck]
}

var _ model.Provider = (*Provider)(nil)

// New builds a provider. It makes no request.
func New(opts Options) (*Provider, error) {
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: max tokens %d is negative", opts.MaxTokens)
	}
	ropts := []option.RequestOption{
		// Retries are ours, so one schedule with an injectable sleep rules.
		option.WithMaxRetries(0),
		option.WithMiddleware(model.Middleware),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("openai: base URL %q is not an absolute URL", opts.BaseURL)
		}
		ropts = append(ropts, option.WithBaseURL(opts.BaseURL))
	}
	if opts.APIKey != "" {
		ropts = append(ropts, option.WithAPIKey(opts.APIKey))
	}
	if opts.HTTPClient != nil {
		ropts = append(ropts, option.WithHTTPClient(opts.HTTPClient))
	}
	m := opts.Model
	if m == "" {
		m = DefaultModel
	}
	return &Provider{
		client:    sdk.NewClient(ropts...),
		model:     m,
		maxTokens: opts.MaxTokens,
		retry:     opts.Retry,
		stream:    !opts.DisableStreaming,
		textOnly:  opts.TextOnly,
	}, nil
}

// Name returns "openai".
func (p *Provider) Name() string { return Name }

// TakesImages reports whether tool results' images are sent: unless the
// provider was set up TextOnly.
func (p *Provider) TakesImages(string) bool { return !p.textOnly }

// Model returns the model asked for when a Request names none.
func (p *Provider) Model() string { return p.model }

// Complete sends req and returns the model's answer, retrying 429, 5xx and
// dropped connections.
func (p *Provider) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	params, d, err := p.params(req)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if p.stream {
		params.StreamOptions.IncludeUsage = sdk.Bool(true)
	}
	body, err := requestBody(params, d)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	out := model.StreamTo(req.Stream)
	return model.Call(ctx, p.retry, Name, func(ctx context.Context) (*model.Response, error) {
		if p.stream {
			out.Attempt()
			return p.completeStream(ctx, body, params.Model, out)
		}
		return p.completeOnce(ctx, body, params.Model)
	})
}

// params maps a request to the wire format, but for the tools, which are
// the deck's.
func (p *Provider) params(req model.Request) (sdk.ChatCompletionNewParams, *deck, error) {
	var params sdk.ChatCompletionNewParams
	params.Model = shared.ChatModel(req.Model)
	if req.Model == "" {
		params.Model = p.model
	}
	if n := req.MaxTokens; n > 0 {
		params.MaxCompletionTokens = sdk.Int(int64(n))
	} else if p.maxTokens > 0 {
		params.MaxCompletionTokens = sdk.Int(int64(p.maxTokens))
	}
	// Who pays travels beside the prompt, never in it: user takes every
	// id, safety_identifier the end user's alone.
	if key := req.Attribution.Key(); key != "" {
		params.User = sdk.String(key)
	}
	if id := req.Attribution.User; id != "" {
		params.SafetyIdentifier = sdk.String(id)
	}
	d, err := p.decks.Get(req.Tools, encodeDeck)
	if err != nil {
		return params, nil, err
	}
	// Calls with the same prefix (system prompt and definitions) share a
	// cache key, so the provider routes them to the cache that holds it.
	params.PromptCacheKey = sdk.String(d.prefixKey(req))
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	var images []sdk.ChatCompletionContentPartUnionParam
	for i, m := range req.Messages {
		if m.Role != model.RoleTool && len(images) > 0 {
			params.Messages = append(params.Messages, sdk.UserMessage(images))
			images = nil
		}
		msg, err := message(m)
		if err != nil {
			return params, nil, fmt.Errorf("message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, msg)
		if m.Role == model.RoleTool && len(m.Images) > 0 && !p.textOnly {
			images = append(images, imageParts(m)...)
		}
	}
	if len(images) > 0 {
		params.Messages = append(params.Messages, sdk.UserMessage(images))
	}
	return params, d, nil
}

// deck is a deck of tool definitions in wire form: the tools array as the
// SDK encodes it, spliced into each call's request (requestBody).
type deck struct {
	// tools is nil when there are none: no tools are sent, not an empty list.
	tools []byte
	// prefix is the last system prompt sent with the deck and its
	// PrefixKey: a turn's calls all send the same.
	prefix atomic.Pointer[[2]string]
}

// encodeDeck encodes each definition through the SDK once: the bytes are
// those the SDK writes for the definition itself, in the array it writes.
func encodeDeck(tools []model.ToolSpec) (*deck, error) {
	d := &deck{}
	for i, t := range tools {
		def, err := functionDefinition(t)
		if err != nil {
			return nil, err
		}
		raw, err := sdk.ChatCompletionToolUnionParam{OfFunction: &sdk.ChatCompletionFunctionToolParam{Function: def}}.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		sep := byte(',')
		if i == 0 {
			sep = '['
		}
		d.tools = append(append(d.tools, sep), raw...)
	}
	if d.tools != nil {
		d.tools = append(d.tools, ']')
	}
	return d, nil
}

// toolsSlot is where requestBody splices the deck: the encoding of a tools
// array holding one raw 0. A key and value in a message are inside a JSON
// string, their quotes escaped, so the last match is the request's own key.
var (
	toolsSlot       = []byte(`"tools":[0]`)
	toolsSlotParams = []sdk.ChatCompletionToolUnionParam{param.Override[sdk.ChatCompletionToolUnionParam](json.RawMessage("0"))}
)

// requestBody is the request as the SDK encodes params with the deck's
// tools. Handed to the SDK as raw JSON for each call, the deck would be
// scanned whole again (the SDK compacts raw JSON it is given): a sixth of
// a call's CPU with every built-in tool offered.
func requestBody(params sdk.ChatCompletionNewParams, d *deck) ([]byte, error) {
	if d.tools == nil {
		return params.MarshalJSON()
	}
	params.Tools = toolsSlotParams
	b, err := params.MarshalJSON()
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndex(b, toolsSlot)
	if i < 0 {
		return nil, errors.New("the encoded request has no tools to replace")
	}
	at := i + len(`"tools":`)
	out := make([]byte, 0, len(b)+len(d.tools))
	out = append(out, b[:at]...)
	out = append(out, d.tools...)
	return append(out, b[i+len(toolsSlot):]...), nil
}

// prefixKey is req.PrefixKey(), remembered for the deck's last system
// prompt: hashing the whole prefix again on every call is wasted work.
func (d *deck) prefixKey(req model.Request) string {
	if last := d.prefix.Load(); last != nil && last[0] == req.System {
		return last[1]
	}
	key := req.PrefixKey()
	d.prefix.Store(&[2]string{req.System, key})
	return key
}

// message maps one history entry.
func message(m model.Message) (sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case model.RoleUser:
		return sdk.UserMessage(m.Text), nil
	case model.RoleTool:
		if m.ToolCallID == "" {
			return sdk.ChatCompletionMessageParamUnion{}, errors.New("tool message without a call id")
		}
		return sdk.ToolMessage(m.Text, m.ToolCallID), nil
	case model.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		// An assistant message needs content unless it carries tool calls.
		if m.Text != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = sdk.String(m.Text)
		}
		for _, c := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      c.Name,
						Arguments: argumentsText(c.Arguments),
					},
				},
			})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}

// imageParts are a tool message's images as user content: a line naming
// the call, then each image as a data URL.
func imageParts(m model.Message) []sdk.ChatCompletionContentPartUnionParam {
	parts := []sdk.ChatCompletionContentPartUnionParam{
		sdk.TextContentPart(fmt.Sprintf("The %d image(s) of tool call %s (%s):", len(m.Images), m.ToolCallID, m.ToolName)),
	}
	for _, img := range m.Images {
		parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
			URL: "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data),
		}))
	}
	return parts
}

// functionDefinition sends the tool's schema byte for byte: the tools are
// part of the stable prefix, and re-encoding through a map would reorder
// the author's keys.
func functionDefinition(t model.ToolSpec) (shared.FunctionDefinitionParam, error) {
	schema := t.Schema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if !json.Valid(schema) {
		return shared.FunctionDefinitionParam{}, fmt.Errorf("tool %q: schema is not valid JSON", t.Name)
	}
	raw, err := json.Marshal(struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}{t.Name, t.Description, schema})
	if err != nil {
		return shared.FunctionDefinitionParam{}, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return param.Override[shared.FunctionDefinitionParam](json.RawMessage(raw)), nil
}

// argumentsText is a call's arguments as the wire carries them: a JSON text.
func argumentsText(args json.RawMessage) string {
	if len(args) == 0 {
		return "{}"
	}
	return string(args)
}

// arguments turns the model's argument text into JSON. Text that is not
// JSON (a model can write anything) is kept as a JSON string, so the
// runtime's repair step sees it rather than an unusable raw message.
func arguments(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// completeOnce makes one plain request.
func (p *Provider) completeOnce(ctx context.Context, body []byte, requested string) (*model.Response, error) {
	res, err := p.client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{}, withBody(body))
	if err != nil {
		return nil, err
	}
	if len(res.Choices) == 0 {
		return nil, errors.New("answer has no choices")
	}
	ch := res.Choices[0]
	out := &model.Response{
		Model:      res.Model,
		Text:       ch.Message.Content,
		Thinking:   reasoning(ch.Message.JSON.ExtraFields),
		StopReason: ch.FinishReason,
		Usage:      usage(res.Usage),
	}
	if out.Model == "" {
		out.Model = requested
	}
	for _, c := range ch.Message.ToolCalls {
		if c.Type != "" && c.Type != "function" {
			continue
		}
		id := c.ID
		if id == "" {
			id = newCallID()
		}
		out.ToolCalls = append(out.ToolCalls, model.ToolCall{ID: id, Name: c.Function.Name, Arguments: arguments(c.Function.Arguments)})
	}
	return out, nil
}

// withBody sends body as the request: the parameters passed beside it are
// empty, since the SDK reads them only to encode them.
func withBody(body []byte) option.RequestOption {
	return option.WithRequestBody("application/json", body)
}

// usage maps the provider's token counts.
func usage(u sdk.CompletionUsage) model.Usage {
	cached := u.PromptTokensDetails.CachedTokens
	written := u.PromptTokensDetails.CacheWriteTokens
	return model.Usage{
		InputUncached: max(u.PromptTokens-cached-written, 0),
		CacheRead:     cached,
		CacheWrite:    written,
		Output:        u.CompletionTokens,
	}
}

// reasoning reads the thinking text OpenAI-compatible servers add to a
// message under a field the SDK does not know.
func reasoning(extra map[string]respjson.Field) string {
	var raws [2]json.RawMessage
	for i, key := range []string{"reasoning_content", "reasoning"} {
		if f, ok := extra[key]; ok {
			raws[i] = json.RawMessage(f.Raw())
		}
	}
	return reasoningText(raws[0], raws[1])
}

// reasoningText is the first of the reasoning_content and reasoning
// values that is a non-empty string.
func reasoningText(raws ...json.RawMessage) string {
	for _, raw := range raws {
		var s string
		if len(raw) > 0 && json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// newCallID names a call the server left unnamed; tool results are matched
// by it, so it must be unique.
func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "call_" + hex.EncodeToString(b)
}
