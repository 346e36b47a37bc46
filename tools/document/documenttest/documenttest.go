// Package documenttest makes small files of each format documents accept,
// and broken ones, for tests and benchmarks.
package documenttest

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
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
	return buildPDFPadded(pages, encrypted, image, nil)
}

func buildPDFPadded(pages [][]string, encrypted, image bool, pad []byte) []byte {
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
	if pad != nil {
		objs = append(objs, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(pad), pad))
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

// Corpus writes text that reads, to search and index, like prose: words of
// a seeded vocabulary drawn with Zipf frequencies (a few very common, most
// rare), in sentences and paragraphs. The same seed gives the same text.
type Corpus struct {
	words []string
	rng   *rand.Rand
	zipf  *rand.Zipf
}

// NewCorpus returns a corpus of a vocabulary of size words, seeded.
func NewCorpus(seed uint64, size int) *Corpus {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	onsets := strings.Fields("b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl pr sh st th tr")
	vowels := strings.Fields("a e i o u ai ea io ou")
	codas := []string{"", "", "", "n", "r", "s", "t", "l", "nd", "st", "ng"}
	seen := map[string]bool{}
	words := make([]string, 0, size)
	for len(words) < size {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(onsets[rng.IntN(len(onsets))])
			b.WriteString(vowels[rng.IntN(len(vowels))])
			b.WriteString(codas[rng.IntN(len(codas))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return &Corpus{words: words, rng: rng, zipf: rand.NewZipf(rng, 1.07, 2, uint64(size-1))}
}

// Word returns one word drawn by frequency.
func (c *Corpus) Word() string { return c.words[c.zipf.Uint64()] }

// Rare returns a word of frequency rank between from and to: the kind of
// word a query is made of.
func (c *Corpus) Rare(from, to int) string { return c.words[from+c.rng.IntN(to-from)] }

// Text returns paragraphs of sentences of at least chars bytes.
func (c *Corpus) Text(chars int) string {
	var b strings.Builder
	b.Grow(chars + 200)
	for b.Len() < chars {
		for s := range 3 + c.rng.IntN(4) {
			if s > 0 {
				b.WriteByte(' ')
			}
			n := 8 + c.rng.IntN(13)
			for i := range n {
				w := c.Word()
				if i == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				} else {
					b.WriteByte(' ')
				}
				b.WriteString(w)
			}
			b.WriteByte('.')
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

// Query returns a query of n words of middling frequency.
func (c *Corpus) Query(n int) string {
	q := make([]string, n)
	for i := range q {
		q[i] = c.Rare(20, min(3000, len(c.words)))
	}
	return strings.Join(q, " ")
}

// PaddedPDF returns a PDF of pages (as PDF makes) padded to about size
// bytes with a binary stream no page draws, as images fill real PDFs.
func PaddedPDF(size int, pages ...[]string) []byte {
	doc := buildPDF(pages, false, false)
	if len(doc) >= size {
		return doc
	}
	pad := make([]byte, size-len(doc))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range pad {
		pad[i] = byte(rng.IntN(256))
	}
	return buildPDFPadded(pages, false, false, pad)
}

// CyclicPDF returns a PDF whose page tree holds itself: a walk that does
// not bound its depth never ends.
func CyclicPDF() []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [2 0 R] /Count 1 >>",
	}
	return rawPDF(objs, "")
}

// PrevLoopPDF returns a one-page PDF whose trailer's /Prev points at its
// own cross-reference table: a reader that follows the chain without
// remembering where it has been reads that table for ever.
func PrevLoopPDF() []byte {
	return rawPDF(onePage("2 0 R", "A trailer that points back at itself."), "/Prev %[1]d")
}

// OwnParentPDF returns a one-page PDF whose page is its own /Parent and
// holds no /Resources: a reader looking up the inherited resources climbs
// that chain for ever.
func OwnParentPDF() []byte {
	return rawPDF(onePage("3 0 R", "A page that is its own parent."), "")
}

// onePage is a catalog, a page tree and one page (object 3) of one line
// of text, whose /Parent is parent and which has no resources of its own.
func onePage(parent, text string) []string {
	content := "BT /F1 11 Tf 72 740 Td (" + escape(text) + ") Tj ET\n"
	return []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent " + parent + " /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
	}
}

// rawPDF lays out objs (numbered from 1) with a cross-reference table and
// a trailer; extra is added to the trailer, formatted with the table's
// offset.
func rawPDF(objs []string, extra string) []byte {
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
	if extra != "" {
		extra = " " + fmt.Sprintf(extra, xref)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, extra, xref)
	return b.Bytes()
}

// DeepDOCX returns a Word document whose body is depth paragraphs each
// nested in the one before (two million zip to about 32 KB): a reader that
// keeps every open element grows with the depth.
func DeepDOCX(depth int) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("word/document.xml")
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`+
		`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>`)
	for _, tag := range []string{"<w:p>", "</w:p>"} {
		chunk := []byte(strings.Repeat(tag, 4096))
		for left := depth; left > 0; left -= 4096 {
			_, _ = w.Write(chunk[:len(tag)*min(left, 4096)])
		}
		if tag == "<w:p>" {
			_, _ = io.WriteString(w, `<w:r><w:t>deep</w:t></w:r>`)
		}
	}
	_, _ = io.WriteString(w, `</w:body></w:document>`)
	_ = zw.Close()
	return buf.Bytes()
}

// ExtendsLoopPDF returns a one-page PDF whose page is stored in an object
// stream that does not hold it and /Extends itself: a reader looking for
// the page searches that stream for ever, reading the file each time. No
// check of toolgate's walks this chain: only a context that stops reads,
// or the box's bounds, end it.
func ExtendsLoopPDF() []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n")
	offsets := map[int]int{}
	obj := func(n int, body string) {
		offsets[n] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", n, body)
	}
	obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	// Object 3 is said to be in stream 4, which holds only object 9.
	held := "9 0 << /Type /Page >>"
	obj(4, fmt.Sprintf("<< /Type /ObjStm /N 1 /First 4 /Extends 4 0 R /Length %d >>\nstream\n%s\nendstream", len(held), held))
	// The cross-reference stream (object 5), uncompressed: W [1 4 2].
	xref := b.Len()
	offsets[5] = xref
	var rows bytes.Buffer
	row := func(kind byte, field2 uint32, field3 uint16) {
		rows.WriteByte(kind)
		rows.Write([]byte{byte(field2 >> 24), byte(field2 >> 16), byte(field2 >> 8), byte(field2)})
		rows.Write([]byte{byte(field3 >> 8), byte(field3)})
	}
	row(0, 0, 65535)
	row(1, uint32(offsets[1]), 0)
	row(1, uint32(offsets[2]), 0)
	row(2, 4, 0)
	row(1, uint32(offsets[4]), 0)
	row(1, uint32(offsets[5]), 0)
	fmt.Fprintf(&b, "5 0 obj\n<< /Type /XRef /Size 6 /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n", rows.Len())
	b.Write(rows.Bytes())
	fmt.Fprintf(&b, "\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n", xref)
	return b.Bytes()
}
