package preview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func FuzzBuild(f *testing.F) {
	seeds := []string{
		`[]`, `{}`, `0`, `"x"`, `null`,
		`{"a":"` + strings.Repeat("long ", 200) + `","b":[1,2,3],"c":{"d":null}}`,
		`[` + strings.Repeat(`{"id":12345,"tags":["x","y"],"s":"\"q\" \\ \u00e9 \ud83d\ude00"},`, 30) + `1]`,
		`[` + strings.Repeat(`[[[1,2],[3]],`, 60) + `[]]`,
		`{"n":` + strings.Repeat("9", 600) + `}`,
		`[` + strings.Repeat(`"`+strings.Repeat("é", 50)+`",`, 20) + `"end"]`,
		strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300),
		`[1, 2, 3` + strings.Repeat(", 4", 200),
		strings.Repeat("text line with \x01 control and \xff bad bytes\n", 30),
		strings.Repeat("{\"k\": \"v\"}\n", 50),
		string(benchJSON(f, 8<<10)),
	}
	for i, s := range seeds {
		f.Add([]byte(s), i%2 == 0, uint16(i*97))
		f.Add([]byte(s), i%2 == 1, uint16(i*31))
	}
	f.Fuzz(func(t *testing.T, content []byte, asJSON bool, limit uint16) {
		kind := Text
		if asJSON {
			kind = JSON
		}
		lim := MinLimit + int(limit)%2048
		res, err := Build(kind, content, Context{Ref: "r_fuzz", Limit: lim, TruncatedAtSource: limit%3 == 0})
		require.NoError(t, err)
		require.LessOrEqual(t, utf8.RuneCount(res.Body), lim)
		switch {
		case res.Partial:
			require.True(t, json.Valid(res.Body), "invalid preview %q", res.Body)
			require.True(t, utf8.Valid(res.Body))
			require.True(t, bytes.HasPrefix(res.Body, []byte(`{"_toolResultContext":{"ref":"r_fuzz",`)))
			require.Contains(t, string(res.Body), `"partial":true`)
		case !bytes.Equal(res.Body, content):
			// The one change a whole result may get: JSON compacted.
			require.Equal(t, JSON, kind)
			var compact bytes.Buffer
			require.NoError(t, json.Compact(&compact, content))
			require.Equal(t, compact.String(), string(res.Body))
		}
		var prev int64 = -1
		for _, s := range res.Visible {
			require.Greater(t, s.Start, prev)
			require.Greater(t, s.End, s.Start)
			require.LessOrEqual(t, s.End, int64(len(content)))
			prev = s.End
		}
		// With a budget that records every value, every string is checked,
		// and the scanner agrees with encoding/json plus UTF-8 validity.
		if len(content) < 4096 {
			strict := newScanner(content, 1<<30, maxNodes).run()
			require.Equal(t, json.Valid(content) && utf8.Valid(content), strict)
		}
	})
}
