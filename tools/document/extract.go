package document

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// Bounds on what one file may cost to read: the file as uploaded is
// bounded by the upload limit; these bound what it expands to.
const (
	// MaxTextChars is the most characters of text one file may yield.
	MaxTextChars = 5_000_000
	// MaxPDFPages is the most pages of a PDF that are read.
	MaxPDFPages = 5_000
	// MaxDOCXXMLBytes bounds word/document.xml once decompressed (a zip
	// bomb stops here).
	MaxDOCXXMLBytes = 64 << 20
	// MaxDOCXDepth bounds how deeply the elements of word/document.xml
	// nest: the XML decoder keeps every open element, so two million
	// nested paragraphs (32 KB zipped) would hold hundreds of MB. Real
	// documents, tables in tables included, nest a few dozen deep.
	MaxDOCXDepth = 256
)

// The formats Extract reads, as Document.mimeType reports them.
const (
	MIMEText     = "text/plain"
	MIMEMarkdown = "text/markdown"
	MIMEHTML     = "text/html"
	MIMEPDF      = "application/pdf"
	MIMEDOCX     = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
)

// Unreadable is a file whose text cannot be extracted; its message is the
// reason recorded on the document (status FAILED).
type Unreadable struct{ Reason string }

func (e *Unreadable) Error() string { return e.Reason }

func unreadable(format string, args ...any) error {
	return &Unreadable{Reason: fmt.Sprintf(format, args...)}
}

// Detect names the format of a file from its name, the type the client
// sent and its first bytes, in that order of trust for text formats; a
// PDF or zip signature always wins over a name.
func Detect(filename, mimeType string, data []byte) string {
	switch ext := strings.ToLower(path.Ext(filename)); {
	case bytes.HasPrefix(data, []byte("%PDF-")):
		return MIMEPDF
	case ext == ".docx":
		return MIMEDOCX
	case ext == ".pdf":
		return MIMEPDF
	case ext == ".md" || ext == ".markdown":
		return MIMEMarkdown
	case ext == ".html" || ext == ".htm" || ext == ".xhtml":
		return MIMEHTML
	case ext == ".txt" || ext == ".text" || ext == ".csv" || ext == ".log":
		return MIMEText
	}
	mt, _, _ := strings.Cut(strings.ToLower(mimeType), ";")
	switch strings.TrimSpace(mt) {
	case MIMEPDF, MIMEDOCX, MIMEHTML, MIMEMarkdown, MIMEText:
		return strings.TrimSpace(mt)
	case "application/xhtml+xml":
		return MIMEHTML
	}
	if bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		return MIMEDOCX
	}
	sniffed, _, _ := strings.Cut(http.DetectContentType(data), ";")
	if sniffed == MIMEHTML {
		return MIMEHTML
	}
	return MIMEText
}

// Extract returns the text of a file of format mimeType (as Detect names
// it), in this process. A file that cannot be read is an *Unreadable error
// naming why; a cancelled ctx stops a long read of a PDF at its next read
// of the file. The loops of hostile files known are refused, but a parser
// may loop or bloat where no check looks: read untrusted files with
// Box.Extract, which bounds the process.
func Extract(ctx context.Context, mimeType string, data []byte) (text string, err error) {
	switch mimeType {
	case MIMEPDF:
		text, err = extractPDF(ctx, data)
	case MIMEDOCX:
		text, err = extractDOCX(data)
	case MIMEHTML:
		text, err = extractHTML(data)
	default:
		text, err = extractText(data)
	}
	if err != nil {
		return "", err
	}
	text = strings.TrimSpace(text)
	if text == "" {
		if mimeType == MIMEPDF {
			return "", unreadable("no text found in the PDF: it is probably scanned images, and text is not recognised in images")
		}
		return "", unreadable("no text found in the file")
	}
	if utf8.RuneCountInString(text) > MaxTextChars {
		return "", unreadable("the file's text passes %d characters", MaxTextChars)
	}
	return text, nil
}

func extractText(data []byte) (string, error) {
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return "", unreadable("a binary file, not text: upload text, Markdown, HTML, PDF or DOCX")
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), nil
}

// block elements end a line in extracted HTML.
var block = map[string]bool{"p": true, "div": true, "br": true, "li": true, "tr": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "pre": true, "section": true, "article": true, "table": true,
	"ul": true, "ol": true, "blockquote": true, "hr": true, "title": true}

func extractHTML(data []byte) (string, error) {
	z := html.NewTokenizer(bytes.NewReader(data))
	var b strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			if errors.Is(z.Err(), io.EOF) {
				return collapse(b.String()), nil
			}
			return "", unreadable("unreadable HTML: %v", z.Err())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "noscript", "template", "svg":
				skip++
			}
			if block[string(name)] {
				b.WriteByte('\n')
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "noscript", "template", "svg":
				skip = max(skip-1, 0)
			}
			if block[string(name)] {
				b.WriteByte('\n')
			}
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
				if b.Len() > 4*MaxTextChars {
					return "", unreadable("the file's text passes %d characters", MaxTextChars)
				}
			}
		}
	}
}

// collapse folds runs of spaces within lines and of blank lines.
func collapse(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	blank := true
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		out = append(out, l)
		blank = false
	}
	return strings.Join(out, "\n")
}

func extractDOCX(data []byte) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", unreadable("not a DOCX file: it is not a zip archive")
	}
	var doc *zip.File
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			doc = f
			break
		}
	}
	if doc == nil {
		return "", unreadable("not a DOCX file: the archive has no word/document.xml")
	}
	if doc.UncompressedSize64 > MaxDOCXXMLBytes {
		return "", unreadable("the DOCX body expands past %d MiB", MaxDOCXXMLBytes>>20)
	}
	rc, err := doc.Open()
	if err != nil {
		return "", unreadable("unreadable DOCX: %v", err)
	}
	defer rc.Close()
	// The size in the header may lie: the reader stops one byte past the bound.
	lr := &io.LimitedReader{R: rc, N: MaxDOCXXMLBytes + 1}
	dec := xml.NewDecoder(lr)
	var b strings.Builder
	inText := false
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if lr.N <= 0 {
				return "", unreadable("the DOCX body expands past %d MiB", MaxDOCXXMLBytes>>20)
			}
			return "", unreadable("unreadable DOCX: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth++; depth > MaxDOCXDepth {
				return "", unreadable("unreadable DOCX: its elements nest more than %d deep", MaxDOCXDepth)
			}
			switch t.Name.Local {
			case "t":
				inText = true
			case "tab":
				b.WriteByte('\t')
			case "br", "cr":
				b.WriteByte('\n')
			}
		case xml.EndElement:
			depth--
			switch t.Name.Local {
			case "t":
				inText = false
			case "p":
				b.WriteByte('\n')
			}
		case xml.CharData:
			if inText {
				b.Write(t)
				if b.Len() > 4*MaxTextChars {
					return "", unreadable("the file's text passes %d characters", MaxTextChars)
				}
			}
		}
	}
	if lr.N <= 0 {
		return "", unreadable("the DOCX body expands past %d MiB", MaxDOCXXMLBytes>>20)
	}
	return b.String(), nil
}
