package mcp_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/mcp"
)

func TestValidName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want bool
	}{
		{"crm", true},
		{"crm-eu_2", true},
		{"a", true},
		{strings.Repeat("a", 32), true},
		{strings.Repeat("a", 33), false},
		{"", false},
		{"Crm", false},
		{"2crm", false},
		{"_crm", false},
		{"crm_", false},
		{"crm__eu", false},
		{"crm.eu", false},
		{"crm eu", false},
		{"crm-", true},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, mcp.ValidName(tt.give), tt.give)
	}
}

func TestToolNameRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		giveApp  string
		giveTool string
		want     string
	}{
		{"crm", "find_contact", "crm__find_contact"},
		{"crm", "_private", "crm___private"},
		{"crm", "a__b", "crm__a__b"},
		{"crm-eu", "Get-Deal", "crm-eu__Get-Deal"},
		{strings.Repeat("a", 32), strings.Repeat("t", 30), strings.Repeat("a", 32) + "__" + strings.Repeat("t", 30)},
	}
	for _, tt := range tests {
		got, err := mcp.ToolName(tt.giveApp, tt.giveTool)
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
		require.LessOrEqual(t, len(got), mcp.MaxNameLen)

		app, tool, ok := mcp.SplitToolName(got)
		require.True(t, ok, got)
		require.Equal(t, tt.giveApp, app)
		require.Equal(t, tt.giveTool, tool)
	}
}

func TestToolNameRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		giveApp  string
		giveTool string
		want     string
	}{
		{"crm", "find.contact", `tool name "find.contact"`},
		{"crm", "", `tool name ""`},
		{"crm", "find contact", `tool name "find contact"`},
		{"Crm", "find", `application name "Crm"`},
		{strings.Repeat("a", 32), strings.Repeat("t", 31), "over 64"},
	}
	for _, tt := range tests {
		_, err := mcp.ToolName(tt.giveApp, tt.giveTool)
		require.ErrorContains(t, err, tt.want)
	}
}

func TestSplitToolNameRefuses(t *testing.T) {
	t.Parallel()
	for _, give := range []string{"calculator", "crm__", "__find", "Crm__find", "crm_x", ""} {
		_, _, ok := mcp.SplitToolName(give)
		require.False(t, ok, give)
	}
}

func TestApplicationValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give mcp.Application
		want string
	}{
		{"bad name", mcp.Application{Name: "CRM", URL: "https://crm.example/mcp"}, `application name "CRM"`},
		{"relative url", mcp.Application{Name: "crm", URL: "/mcp"}, "not an absolute http or https url"},
		{"other scheme", mcp.Application{Name: "crm", URL: "ftp://crm.example/mcp"}, "not an absolute http or https url"},
		{"bad url", mcp.Application{Name: "crm", URL: "http://[::1"}, "parse url"},
		{"bad tool", mcp.Application{Name: "crm", URL: "https://crm.example/mcp", AllowedTools: []string{"a/b"}}, `tool name "a/b"`},
		{"twice", mcp.Application{Name: "crm", URL: "https://crm.example/mcp", AllowedTools: []string{"a", "b", "a"}}, `tool "a" allowed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, tt.give.Validate(), tt.want)
		})
	}
	require.NoError(t, mcp.Application{Name: "crm", URL: "http://127.0.0.1:9/mcp", AllowedTools: []string{"find"}}.Validate())
}
