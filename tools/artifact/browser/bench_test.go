package browser_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/tools/artifact/browser"
)

func tenSlides() string {
	var b strings.Builder
	b.WriteString(`<!doctype html><style>body{margin:0} section{width:1280px;height:720px;box-sizing:border-box;padding:40px;font:32px sans-serif}</style>`)
	for i := range 10 {
		b.WriteString(`<section><h1>Slide ` + strings.Repeat("I", i+1) + `</h1><ul><li>one point</li><li>another point</li></ul></section>`)
	}
	return b.String()
}

// BenchmarkCaptureDeck renders a 10-slide deck into 10 page images on a
// warm pool: the work of one full inspection. Besides Go's allocations it
// reports, on Linux, the peak memory of the browser's process tree while
// it ran (browser-peak-MB: proportional sets, what the tree holds;
// browser-rss-peak-MB: resident sets, shared pages counted in each).
func BenchmarkCaptureDeck(b *testing.B) {
	p := need(b)
	deck := tenSlides()
	warm(b, p, deck)
	mem := watchTree(b, p.PID(), sampleEvery)
	b.ResetTimer()
	for b.Loop() {
		err := p.Page(context.Background(), deck, func(ctx context.Context) error {
			rects, _, err := browser.Pages(ctx, 10)
			if err != nil {
				return err
			}
			shots, err := browser.Capture(ctx, rects)
			if err == nil && len(shots) != 10 {
				b.Fatalf("%d images", len(shots))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	mem.report(b)
}

// BenchmarkPrintDeck prints the same deck to a PDF on a warm pool.
func BenchmarkPrintDeck(b *testing.B) {
	p := need(b)
	deck := tenSlides()
	warm(b, p, deck)
	mem := watchTree(b, p.PID(), sampleEvery)
	b.ResetTimer()
	for b.Loop() {
		err := p.Page(context.Background(), deck, func(ctx context.Context) error {
			pdf, err := chromedp.Run(ctx, chromedp.PrintToPDF(chromedp.PDFPrintBackground()))
			if err == nil && len(pdf) == 0 {
				b.Fatal("empty pdf")
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	mem.report(b)
}

// sampleEvery is how often the browser's memory is read while a
// benchmark runs: often enough to see a capture's peak, seldom enough to
// cost the benchmark little.
const sampleEvery = 20 * time.Millisecond

func warm(b *testing.B, p *browser.Pool, deck string) {
	b.Helper()
	if err := p.Page(context.Background(), deck, func(context.Context) error { return nil }); err != nil {
		b.Fatal(err)
	}
}
