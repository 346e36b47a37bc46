package replay_test

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/replay"
)

func Example() {
	p, err := replay.New(replay.Script{Entries: []replay.Entry{{
		Steps: []replay.Step{
			{ToolCalls: []replay.ToolCall{{Name: "calculator", Arguments: []byte(`{"expression": "6*7"}`)}}},
			{Text: "It is 42."},
		},
	}}})
	if err != nil {
		panic(err)
	}
	history := []model.Message{{Role: model.RoleUser, Text: "What is six times seven?"}}
	first, _ := p.Complete(context.Background(), model.Request{Messages: history})
	fmt.Println(first.ToolCalls[0].Name, string(first.ToolCalls[0].Arguments))

	call := first.ToolCalls[0]
	history = append(history,
		model.Message{Role: model.RoleAssistant, ToolCalls: first.ToolCalls},
		model.Message{Role: model.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Text: "42"},
	)
	second, _ := p.Complete(context.Background(), model.Request{Messages: history})
	fmt.Println(second.Text, second.Model)
	// Output:
	// calculator {"expression":"6*7"}
	// It is 42. replay
}
