package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// einoAgent is an Eino ReAct agent as a framework user would write it: the
// eino-ext OpenAI chat model, and one tool, calculator, that asks
// toolgate's calculate over GraphQL.
type einoAgent struct {
	agent *react.Agent
	calls atomic.Int64
}

type calculatorInput struct {
	Expression string `json:"expression" jsonschema:"description=the arithmetic to evaluate, e.g. 2*(3+4)"`
}

func newEinoAgent(ctx context.Context, modelURL string, tg *server, conversation string) (*einoAgent, error) {
	cm, err := openai.NewChatModel(ctx, &openai.ChatModelConfig{BaseURL: modelURL + "/v1", APIKey: "bench", Model: "gpt-4.1"})
	if err != nil {
		return nil, fmt.Errorf("new chat model: %w", err)
	}
	a := &einoAgent{}
	calc, err := utils.InferTool("calculator", "Evaluates arithmetic: + - * / % ^ ( ), functions and constants.",
		func(ctx context.Context, in calculatorInput) (string, error) {
			a.calls.Add(1)
			return tg.calculate(ctx, conversation, in.Expression)
		})
	if err != nil {
		return nil, fmt.Errorf("infer tool: %w", err)
	}
	a.agent, err = react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: cm,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []tool.BaseTool{calc}},
	})
	if err != nil {
		return nil, fmt.Errorf("new react agent: %w", err)
	}
	return a, nil
}

// turn runs one turn, streamed as toolgate's are, to its last chunk.
func (a *einoAgent) turn(ctx context.Context) error {
	sr, err := a.agent.Stream(ctx, []*schema.Message{schema.SystemMessage("Add."), schema.UserMessage("1+1?")})
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	defer sr.Close()
	var text strings.Builder
	for {
		m, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		text.WriteString(m.Content)
	}
	if text.String() != answer {
		return fmt.Errorf("eino answered %q", text.String())
	}
	return nil
}
