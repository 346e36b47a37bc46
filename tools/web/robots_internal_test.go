package web

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRobots(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  string
		allow []string
		deny  []string
	}{
		{
			name:  "star group",
			body:  "User-agent: *\nDisallow: /private/\nAllow: /private/open\n",
			allow: []string{"/", "/public", "/private/open", "/private/open/more"},
			deny:  []string{"/private/", "/private/x"},
		},
		{
			name:  "our own group wins over star",
			body:  "User-agent: *\nDisallow: /\n\nUser-agent: Toolgate-Web\nUser-agent: other\nDisallow: /mine # comment\n",
			allow: []string{"/", "/other"},
			deny:  []string{"/mine", "/mine/x"},
		},
		{
			name:  "wildcards and end anchors",
			body:  "User-agent: *\nDisallow: /*.pdf$\nDisallow: /search?*q=\nAllow: /search?lang=en$\n",
			allow: []string{"/doc.pdf.html", "/search?lang=en", "/doc"},
			deny:  []string{"/a/doc.pdf", "/search?q=tides", "/search?x=1&q=2"},
		},
		{
			name:  "other robots only",
			body:  "User-agent: googlebot\nDisallow: /\n",
			allow: []string{"/", "/anything"},
		},
		{
			name:  "empty disallow allows",
			body:  "User-agent: *\nDisallow:\n",
			allow: []string{"/"},
		},
	}
	for _, tt := range tests {
		r := parseRobots([]byte(tt.body), robotsToken)
		for _, p := range tt.allow {
			require.True(t, r.allows(p), "%s: %s", tt.name, p)
		}
		for _, p := range tt.deny {
			require.False(t, r.allows(p), "%s: %s", tt.name, p)
		}
	}
}
