package web_test

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/web"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	base, err := url.Parse("https://example.org/tides")
	require.NoError(t, err)
	tests := []struct {
		name      string
		give      string
		typ       string
		wantTitle string
		want      string
		wantErr   string
	}{
		{
			name: "article", give: article, typ: "text/html", wantTitle: "Tides",
			// Navigation, footer and script go; readability makes the h1 an h2.
			want: "## How tides work\n\n" +
				"Tides are the rise and fall of sea levels caused by the combined effects of the gravitational forces exerted by the Moon and the Sun and the rotation of the Earth. Most places in the ocean usually experience two high tides and two low tides each day.\n\n" +
				"## Spring and neap tides\n\n" +
				"When the Sun and Moon are aligned, their pull combines and the tidal range is greatest: these are [spring tides](https://example.org/spring). When they are at right angles the range is smallest, the neap tides, which come twice a month as well.\n\n" +
				"- Spring tides: new and full moon\n- Neap tides: first and last quarter\n\n" +
				"```\nrange = high - low\n```",
		},
		{
			name: "numbered list and unsafe links", typ: "text/html", wantTitle: "Steps",
			give: `<html><head><title>Steps</title></head><body><article><p>` + strings.Repeat("Follow these steps with care, one after another. ", 12) + `</p>` +
				`<ol><li>Open <a href="javascript:alert(1)">the box</a></li><li>Read <a href="/manual">the manual</a></li></ol></article></body></html>`,
			want: strings.TrimSpace(strings.Repeat("Follow these steps with care, one after another. ", 12)) + "\n\n1. Open the box\n2. Read [the manual](https://example.org/manual)",
		},
		{name: "plain text", give: "line one  \r\n\r\n\r\nline two\n", typ: "text/plain", want: "line one\n\nline two"},
		{name: "empty page", give: "<html><body></body></html>", typ: "text/html", wantErr: "no readable text"},
		{name: "binary as text", give: "\xff\xfe\x00", typ: "text/plain", wantErr: "invalid UTF-8"},
		{
			// Hostile: far more elements than a page needs is refused, not parsed for ever.
			name: "element bomb", typ: "text/html", wantErr: "no readable text",
			give: "<html><body>" + strings.Repeat("<div><span>x</span></div>", 70_000) + "</body></html>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			title, text, err := web.Extract(&web.Document{URL: base, ContentType: tt.typ, Body: []byte(tt.give)})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantTitle, title)
			require.Equal(t, tt.want, text)
		})
	}
}

// BenchmarkExtract measures extraction throughput: MB/s of HTML to text.
func BenchmarkExtract(b *testing.B) {
	var page bytes.Buffer
	page.WriteString("<html><head><title>Bench</title></head><body><nav>" + strings.Repeat(`<a href="/x">menu</a>`, 50) + "</nav><article><h1>Report</h1>")
	for i := range 400 {
		page.WriteString(`<p>Paragraph with <a href="/ref">a link</a>, <code>code</code> and enough words to be read as content by the scorer, number `)
		page.WriteString(strings.Repeat("word ", i%20+10))
		page.WriteString("</p>")
		if i%25 == 0 {
			page.WriteString("<h2>Section</h2><ul><li>one</li><li>two</li></ul>")
		}
	}
	page.WriteString("</article><footer>" + strings.Repeat("<p>footer</p>", 20) + "</footer></body></html>")
	base, _ := url.Parse("https://example.org/report")
	doc := &web.Document{URL: base, ContentType: "text/html", Body: page.Bytes()}
	b.SetBytes(int64(page.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := web.Extract(doc); err != nil {
			b.Fatal(err)
		}
	}
}
