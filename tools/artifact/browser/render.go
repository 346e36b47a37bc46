package browser

import (
	"context"
	"fmt"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Rect is a box on the page, in CSS pixels from the document's top left.
type Rect struct {
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// slidesJS finds the pages of a document: its slides (section elements
// that are not inside another section), or else the whole document cut
// into viewport-high pages.
const slidesJS = `(() => {
	const slides = [...document.querySelectorAll('section')].filter(s => !s.parentElement.closest('section'));
	const sx = window.scrollX, sy = window.scrollY;
	if (slides.length) return slides.map(s => { const r = s.getBoundingClientRect(); return {x: r.left + sx, y: r.top + sy, width: r.width, height: r.height}; });
	const w = Math.max(document.documentElement.scrollWidth, 1), h = Math.max(document.documentElement.scrollHeight, 1);
	const out = [];
	for (let y = 0; y < h; y += %d) out.push({x: 0, y: y, width: Math.min(w, %d), height: Math.min(%d, h - y)});
	return out;
})()`

// Pages returns the document's pages (slides, or viewport-high pieces)
// and the total count; at most max rects are returned.
func Pages(ctx context.Context, max int) ([]Rect, int, error) {
	rects, err := chromedp.Run(ctx, chromedp.Evaluate[[]Rect](fmt.Sprintf(slidesJS, Height, Width, Height)))
	if err != nil {
		return nil, 0, fmt.Errorf("find pages: %w", err)
	}
	n := len(rects)
	if n > max {
		rects = rects[:max]
	}
	return rects, n, nil
}

// Capture returns a JPEG image of each rect, at most Width × Height CSS
// pixels each (a larger rect is cut).
func Capture(ctx context.Context, rects []Rect) ([][]byte, error) {
	out := make([][]byte, 0, len(rects))
	quality := int64(80)
	beyond := true
	for i, r := range rects {
		w, h := min(max(r.Width, 1), Width*2), min(max(r.Height, 1), Height*2)
		shot, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format: page.CaptureScreenshotFormatJpeg, Quality: &quality, CaptureBeyondViewport: &beyond,
			Clip: &page.Viewport{X: r.X, Y: r.Y, Width: w, Height: h, Scale: 1},
		})
		if err != nil {
			return nil, fmt.Errorf("capture page %d: %w", i+1, err)
		}
		out = append(out, shot.Data)
	}
	return out, nil
}
