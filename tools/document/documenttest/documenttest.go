// Package documenttest makes small files of each format documents accept,
// and broken ones, for tests and benchmarks.
package documenttest

import (
	"archive/zip"
	"bytes"
	"fmt"
	"strings"
)

// PDF returns a PDF with one page per element of pages, each page's lines
// written in Helvetica.
func PDF(pages ...[]string) []byte {
	return buildPDF(pages, false, false)
}

// EncryptedPDF returns a PDF that needs a password.
func EncryptedPDF() []byte {
	return buildPDF([][]string{{"secret"}}, true, false)
}

// ImagePDF returns a PDF whose one page draws an image and has no text,
// like a scan.
func ImagePDF() []byte {
	return buildPDF([][]string{nil}, false, true)
}

func escape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	return r.Replace(s)
}

func buildPDF(pages [][]string, encrypted, image bool) []byte {
	var objs []string
	n := len(pages)
	// 1 catalog, 2 pages, 3 font, then page and content per page.
	kids := make([]string, n)
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, lines := range pages {
		var content strings.Builder
		if image {
			content.WriteString("q 400 0 0 300 100 400 cm /Im1 Do Q\n")
		} else {
			content.WriteString("BT /F1 11 Tf 14 TL 72 740 Td\n")
			for _, l := range lines {
				fmt.Fprintf(&content, "(%s) Tj T*\n", escape(l))
			}
			content.WriteString("ET\n")
		}
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 3 0 R >> >> >>", 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", content.Len(), content.String()))
	}
	trailer := fmt.Sprintf("/Size %d /Root 1 0 R", len(objs)+1)
	if encrypted {
		objs = append(objs, "<< /Filter /Standard /V 1 /R 2 /O <"+strings.Repeat("ab", 32)+"> /U <"+strings.Repeat("cd", 32)+"> /P -4 >>")
		trailer = fmt.Sprintf("/Size %d /Root 1 0 R /Encrypt %d 0 R /ID [<%s> <%s>]", len(objs)+1, len(objs), strings.Repeat("01", 16), strings.Repeat("01", 16))
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n", trailer, xref)
	return b.Bytes()
}

// DOCX returns a Word document with one paragraph per element.
func DOCX(paragraphs ...string) []byte {
	var body strings.Builder
	for _, p := range paragraphs {
		fmt.Fprintf(&body, `<w:p><w:r><w:t xml:space="preserve">%s</w:t></w:r></w:p>`, xmlEscape(p))
	}
	return zipOf(map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"></Types>`,
		"word/document.xml": `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` +
			`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` +
			body.String() + `</w:body></w:document>`,
	})
}

// ZipNotDOCX returns a zip archive that is not a Word document.
func ZipNotDOCX() []byte {
	return zipOf(map[string]string{"notes.txt": "just a zip"})
}

// ZipBombDOCX returns a small DOCX whose body expands to size bytes of
// one repeated character.
func ZipBombDOCX(size int) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("word/document.xml")
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for written := 0; written < size; written += len(chunk) {
		_, _ = w.Write(chunk)
	}
	_ = zw.Close()
	return buf.Bytes()
}

func zipOf(files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"[Content_Types].xml", "word/document.xml", "notes.txt"} {
		body, ok := files[name]
		if !ok {
			continue
		}
		w, _ := zw.Create(name)
		_, _ = w.Write([]byte(body))
	}
	_ = zw.Close()
	return buf.Bytes()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
