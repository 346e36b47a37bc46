package result

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCheckMaxChars(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give    int
		wantErr string
	}{
		{give: MinMaxChars},
		{give: DefaultMaxChars},
		{give: MaxMaxChars},
		{give: MinMaxChars - 1, wantErr: "maxChars out of range: 1023 is not between 1024 and 20000"},
		{give: MaxMaxChars + 1, wantErr: "maxChars out of range: 20001 is not between 1024 and 20000"},
		{give: 0, wantErr: "maxChars out of range: 0 is not between 1024 and 20000"},
	}
	for _, tt := range tests {
		err := CheckMaxChars(tt.give)
		if tt.wantErr == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorIs(t, err, ErrMaxChars)
		require.EqualError(t, err, tt.wantErr)
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	const multi = "héllo wörld ✓ 😀 done" // 20 characters
	long := strings.Repeat("ab", 3000)
	tests := []struct {
		name     string
		text     string
		offset   int
		maxChars int
		want     Page
	}{
		{"start", "hello world", 0, 5, Page{Text: "hello", Offset: 0, NextOffset: 5, Total: 11}},
		{"middle to end", "hello world", 6, 5, Page{Text: "world", Offset: 6, NextOffset: -1, Total: 11}},
		{"window past the end", "hello world", 6, 50, Page{Text: "world", Offset: 6, NextOffset: -1, Total: 11}},
		{"offset past the end", "hello world", 99, 5, Page{Text: "", Offset: 11, NextOffset: -1, Total: 11}},
		{"negative offset", "hello world", -3, 5, Page{Text: "hello", Offset: 0, NextOffset: 5, Total: 11}},
		{"multi-byte offsets", multi, 1, 4, Page{Text: "éllo", Offset: 1, NextOffset: 5, Total: 20}},
		{"four-byte character", multi, 12, 3, Page{Text: "✓ 😀", Offset: 12, NextOffset: 15, Total: 20}},
		{"multi-byte end", multi, 15, 10, Page{Text: " done", Offset: 15, NextOffset: -1, Total: 20}},
		{"default maxChars", long, 0, 0, Page{Text: long[:DefaultMaxChars], Offset: 0, NextOffset: DefaultMaxChars, Total: 6000}},
		{"invalid UTF-8 counts a byte each", "a\xff\xfeb", 1, 2, Page{Text: "\uFFFD\uFFFD", Offset: 1, NextOffset: 3, Total: 4}},
		{"empty text", "", 0, 10, Page{Text: "", Offset: 0, NextOffset: -1, Total: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Window(tt.text, tt.offset, tt.maxChars))
		})
	}
}

func TestWindowPagesCoverTheText(t *testing.T) {
	t.Parallel()
	text := randomText(rand.New(rand.NewPCG(7, 8)), 50_000)
	runes := []rune(text)
	var b strings.Builder
	offset := 0
	for offset >= 0 {
		p := Window(text, offset, 1500)
		require.Equal(t, string(runes[offset:min(offset+1500, len(runes))]), p.Text)
		require.Equal(t, len(runes), p.Total)
		b.WriteString(p.Text)
		offset = p.NextOffset
	}
	require.Equal(t, text, b.String())
}

func TestAdvanceRetreat(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		text := randomText(r, r.IntN(300))
		runes := []rune(text)
		require.Equal(t, len(runes), countChars(text))
		from := r.IntN(len(runes) + 1)
		n := r.IntN(len(runes) + 10)
		start := len(string(runes[:from]))

		end, moved := advance(text, start, n)
		wantMoved := min(n, len(runes)-from)
		require.Equal(t, wantMoved, moved)
		require.Equal(t, len(string(runes[:from+wantMoved])), end)

		back, moved := retreat(text, start, n)
		wantMoved = min(n, from)
		require.Equal(t, wantMoved, moved)
		require.Equal(t, len(string(runes[:from-wantMoved])), back)
	}
}

// randomText mixes ASCII runs with two-, three- and four-byte characters,
// so the eight-byte fast paths meet every boundary.
func randomText(r *rand.Rand, n int) string {
	pieces := []string{"a", "b c", "word ", "é", "✓", "😀", "\n", strings.Repeat("x", 9)}
	var b strings.Builder
	for count := 0; count < n; {
		p := pieces[r.IntN(len(pieces))]
		b.WriteString(p)
		count += utf8.RuneCountInString(p)
	}
	return string([]rune(b.String())[:n])
}

// TestValidUTF8 holds validUTF8 to utf8.ValidString on random bytes that
// are mostly UTF-8, of every length around the 64-byte blocks.
func TestValidUTF8(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "z", " ", "é", "д", "✓", "报", "😀", "\U0010FFFF", "\uFFFD", "\u07FF", "\u0800", "\uD7FF", "\uE000", "\U00010000",
		"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80",
		"\xf5\x80\x80\x80", "\xf8", "\xff", "\x80", "\xbf", "\xc2", "\xe2\x9c", "\xf0\x9f\x98"}
	valid, invalid := 0, 0
	for range 200000 {
		var b strings.Builder
		n := r.IntN(200)
		bad := r.IntN(3) == 0
		for b.Len() < n {
			p := pieces[r.IntN(9)]
			if bad && r.IntN(40) == 0 {
				p = pieces[r.IntN(len(pieces))]
			}
			b.WriteString(p)
		}
		s := b.String()
		want := utf8.ValidString(s)
		require.Equal(t, want, validUTF8(s), "%q", s)
		if want {
			valid++
		} else {
			invalid++
		}
		if len(s) > 0 {
			cut := s[:r.IntN(len(s))]
			require.Equal(t, utf8.ValidString(cut), validUTF8(cut), "%q", cut)
		}
	}
	require.Greater(t, valid, 1000)
	require.Greater(t, invalid, 1000)
	// Every lead and next byte, at each place in an eight-byte word and
	// across a 64-byte block.
	for _, at := range []int{0, 3, 5, 6, 7, 13, 61, 62, 63} {
		for c := range 256 {
			for d := range 256 {
				s := strings.Repeat("x", at) + string([]byte{byte(c), byte(d), 0x80, 0x80})
				require.Equal(t, utf8.ValidString(s), validUTF8(s), "%q", s)
				s = strings.Repeat("д", at/2) + string([]byte{byte(c), byte(d), 0xbf})
				require.Equal(t, utf8.ValidString(s), validUTF8(s), "%q", s)
			}
		}
	}
}

func FuzzValidUTF8(f *testing.F) {
	f.Add([]byte("héllo wörld ✓ 😀"))
	f.Add([]byte("\xed\xa0\x80 \xf4\x90\x80\x80"))
	f.Fuzz(func(t *testing.T, b []byte) {
		require.Equal(t, utf8.Valid(b), validUTF8(string(b)))
	})
}
