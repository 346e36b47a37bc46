package approval_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/approval"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools"
)

func TestPolicy(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	readOnly := &schematype.ToolAnnotations{ReadOnlyHint: &yes}
	destructive := &schematype.ToolAnnotations{ReadOnlyHint: &yes, DestructiveHint: &yes}
	writes := &schematype.ToolAnnotations{ReadOnlyHint: &no}
	app := func(a *schematype.ToolAnnotations) tools.Definition {
		return tools.Definition{Name: "shop__refund", Family: mcp.Family, Annotations: a}
	}
	builtin := tools.Definition{Name: "write_file", Family: "workspace", Effect: tools.EffectWrite}
	tests := []struct {
		name       string
		give       tools.Definition
		rules      approval.Rules
		wantPolicy schematype.ApprovalPolicy
		wantGates  bool
	}{
		{"no default reads as NEVER", app(writes), approval.Rules{}, schematype.ApprovalNever, false},
		{"WRITES: a tool not read-only waits", app(writes), approval.Rules{Default: schematype.ApprovalWrites}, schematype.ApprovalWrites, true},
		{"WRITES: a tool without hints waits", app(nil), approval.Rules{Default: schematype.ApprovalWrites}, schematype.ApprovalWrites, true},
		{"WRITES: a read-only tool runs", app(readOnly), approval.Rules{Default: schematype.ApprovalWrites}, schematype.ApprovalWrites, false},
		{"WRITES: destructive waits though read-only", app(destructive), approval.Rules{Default: schematype.ApprovalWrites}, schematype.ApprovalWrites, true},
		{"the tool's rule beats the default", app(writes), approval.Rules{Default: schematype.ApprovalAlways,
			Application: []schematype.ApprovalRule{{Tool: "refund", Policy: schematype.ApprovalNever}}}, schematype.ApprovalNever, false},
		{"another tool's rule does not apply", app(writes), approval.Rules{Default: schematype.ApprovalNever,
			Application: []schematype.ApprovalRule{{Tool: "lookup", Policy: schematype.ApprovalAlways}}}, schematype.ApprovalNever, false},
		{"an agent tightens", app(readOnly), approval.Rules{Default: schematype.ApprovalWrites,
			Agent: []schematype.ApprovalRule{{Tool: "shop__refund", Policy: schematype.ApprovalAlways}}}, schematype.ApprovalAlways, true},
		{"an agent never loosens", app(writes), approval.Rules{Default: schematype.ApprovalWrites,
			Agent: []schematype.ApprovalRule{{Tool: "shop__refund", Policy: schematype.ApprovalNever}}}, schematype.ApprovalWrites, true},
		{"a built-in tool writes only in its conversation", builtin, approval.Rules{Default: schematype.ApprovalAlways,
			Agent: []schematype.ApprovalRule{{Tool: "write_file", Policy: schematype.ApprovalWrites}}}, schematype.ApprovalWrites, false},
		{"a built-in tool an agent sets ALWAYS waits", builtin, approval.Rules{
			Agent: []schematype.ApprovalRule{{Tool: "write_file", Policy: schematype.ApprovalAlways}}}, schematype.ApprovalAlways, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := approval.Policy(tt.give, tt.rules)
			require.Equal(t, tt.wantPolicy, p)
			require.Equal(t, tt.wantGates, approval.Gates(tt.give, p))
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	const schema = `{"type":"object","properties":{"orders":{"type":"array","items":{"type":"string"}},"amount":{"type":"number"}},"required":["orders","amount"],"additionalProperties":false}`
	tests := []struct {
		name    string
		give    string
		want    string
		wantErr string
	}{
		{"fits", `{"orders":["A1"],"amount":10}`, `{"orders":["A1"],"amount":10}`, ""},
		{"repaired as the model's are", `{"orders":"A1","amount":10}`, `{"amount":10,"orders":["A1"]}`, ""},
		{"a wrong type", `{"orders":["A1"],"amount":"ten"}`, "", "amount"},
		{"a missing field", `{"orders":["A1"]}`, "", "amount"},
		{"not JSON", `{"orders":`, "", "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := approval.Check("shop__refund", schema, tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.JSONEq(t, tt.want, got)
		})
	}
}
