package document_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/document/documenttest"
)

func TestExtractEachFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		filename string
		data     []byte
		wantMIME string
		want     []string
		wantErr  string
	}{
		{"text", "notes.txt", []byte("Plain notes about the VPN."), document.MIMEText, []string{"Plain notes about the VPN."}, ""},
		{"markdown", "guide.md", []byte("# Guide\n\nUse **ZX-4411**."), document.MIMEMarkdown, []string{"# Guide", "ZX-4411"}, ""},
		{"html", "page.html", []byte(`<html><head><style>p{}</style><script>alert(1)</script></head><body><h1>Title</h1><p>Para one.</p><p>Para two.</p></body></html>`),
			document.MIMEHTML, []string{"Title\n\nPara one.\n\nPara two."}, ""},
		{"pdf", "report.pdf", documenttest.PDF([]string{"Quarterly revenue grew.", "Costs (fixed) fell."}, []string{"Page two text."}),
			document.MIMEPDF, []string{"Quarterly revenue grew.", "Costs (fixed) fell.", "Page two text."}, ""},
		{"docx", "memo.docx", documenttest.DOCX("First paragraph.", "Second & last."), document.MIMEDOCX, []string{"First paragraph.\nSecond & last."}, ""},
		{"encrypted pdf", "locked.pdf", documenttest.EncryptedPDF(), document.MIMEPDF, nil, "the PDF is encrypted"},
		{"image-only pdf", "scan.pdf", documenttest.ImagePDF(), document.MIMEPDF, nil, "no text found in the PDF"},
		{"zip named docx", "fake.docx", documenttest.ZipNotDOCX(), document.MIMEDOCX, nil, "not a DOCX file: the archive has no word/document.xml"},
		{"text named docx", "fake.docx", []byte("hello"), document.MIMEDOCX, nil, "not a DOCX file: it is not a zip archive"},
		{"zip bomb", "bomb.docx", documenttest.ZipBombDOCX(document.MaxDOCXXMLBytes + 1<<20), document.MIMEDOCX, nil, "expands past 64 MiB"},
		{"binary", "blob.bin", []byte{0, 1, 2, 3}, document.MIMEText, nil, "a binary file"},
		{"garbage pdf", "x.pdf", []byte("%PDF-1.4\ngarbage"), document.MIMEPDF, nil, "unreadable PDF"},
		{"pdf whose page tree holds itself", "loop.pdf", documenttest.CyclicPDF(), document.MIMEPDF, nil, "page tree is more than 32 levels deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mime := document.Detect(tt.filename, "", tt.data)
			require.Equal(t, tt.wantMIME, mime)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			text, err := document.Extract(ctx, mime, tt.data)
			if tt.wantErr != "" {
				var bad *document.Unreadable
				require.True(t, errors.As(err, &bad), "%v", err)
				require.Contains(t, bad.Reason, tt.wantErr)
				return
			}
			require.NoError(t, err)
			for _, w := range tt.want {
				require.Contains(t, text, w)
			}
		})
	}
}

func TestChunkCoversTextWithOverlap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 300 {
		b.WriteString("Sentence number ")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(" ends here. ")
		if i%20 == 19 {
			b.WriteString("\n\n")
		}
	}
	text := b.String()
	runes := []rune(text)
	pieces := document.Chunk(text)
	require.Greater(t, len(pieces), 3)
	end := 0
	for i, p := range pieces {
		require.LessOrEqual(t, len([]rune(p.Text)), document.ChunkChars)
		require.Equal(t, strings.TrimSpace(string(runes[p.Position:p.Position+len([]rune(p.Text))+countLeading(runes[p.Position:])])), p.Text)
		if i > 0 {
			require.Less(t, p.Position, end, "passages overlap")
		}
		end = p.Position + len([]rune(p.Text))
	}
	require.GreaterOrEqual(t, end, len([]rune(strings.TrimSpace(text)))-1)
}

func countLeading(r []rune) int {
	n := 0
	for n < len(r) && (r[n] == ' ' || r[n] == '\n') {
		n++
	}
	return n
}
