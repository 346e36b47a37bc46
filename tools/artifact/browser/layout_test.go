package browser_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/ledongthuc/pdf"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/artifact/browser"
)

// overflowing is a deck whose second title is too long for its box, and
// whose third slide holds a box that reaches past the slide's edge.
const overflowing = `<!doctype html><style>body{margin:0} section{width:1280px;height:720px;box-sizing:border-box;padding:40px;position:relative;overflow:hidden}
h1{font:48px sans-serif;width:600px;height:60px;margin:0;white-space:nowrap}</style>
<section><h1 id="one">Short</h1></section>
<section><h1 id="two">A title far too long for the box it was given to sit in</h1></section>
<section><div class="wide" style="position:absolute;left:1100px;top:100px;width:400px;height:50px">wide</div></section>`

func TestMeasure(t *testing.T) {
	p := need(t)
	var got []browser.Matched
	var bad []browser.Element
	var n int
	err := p.Page(context.Background(), overflowing, func(ctx context.Context) error {
		var err error
		if got, err = browser.Measure(ctx, []string{"h1", ".nothing", "h1[", "div.wide"}, 20); err != nil {
			return err
		}
		bad, n, err = browser.Overflowing(ctx, 20)
		return err
	})
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, 2, got[0].Count)
	one, two := got[0].Elements[0], got[0].Elements[1]
	require.Equal(t, "h1#one", one.Element)
	require.Equal(t, 1, one.Page)
	require.Zero(t, one.OverflowX, "a short title fits")
	require.Equal(t, 2, two.Page)
	require.Greater(t, two.OverflowX, 100.0, "the long title does not fit its 600px box")
	require.Equal(t, 600.0, two.Box.Width)
	require.Zero(t, got[1].Count)
	require.NotEmpty(t, got[2].Invalid, "a selector the browser cannot parse is named")
	require.True(t, got[3].Elements[0].Outside, "the box reaches past the slide's right edge")
	require.Equal(t, 3, got[3].Elements[0].Page)

	// The long title, the third slide (its content spills past its
	// width) and the wide box itself.
	require.Equal(t, 3, n, "%+v", bad)
	require.Equal(t, []string{"h1#two", "section", "div.wide"}, []string{bad[0].Element, bad[1].Element, bad[2].Element})
	require.Equal(t, 220.0, bad[1].OverflowX)
}

func TestPrintPDF(t *testing.T) {
	p := need(t)
	for _, tt := range []struct {
		give string
		want int
	}{
		{deck, 3},
		{tenSlides(), 10},
		{`<p>One page of prose.</p>`, 1},
	} {
		var out []byte
		err := p.Page(context.Background(), tt.give, func(ctx context.Context) error {
			var err error
			out, err = browser.PrintPDF(ctx)
			return err
		})
		require.NoError(t, err)
		r, err := pdf.NewReader(bytes.NewReader(out), int64(len(out)))
		require.NoError(t, err)
		require.Equal(t, tt.want, r.NumPage())
	}
}
