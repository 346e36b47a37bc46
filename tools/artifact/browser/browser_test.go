package browser_test

import (
	"bytes"
	"context"
	"image/jpeg"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/artifact/browser"
)

// pool is the one browser of this test binary: starting Chromium is the
// slow part, so the tests share it.
var pool *browser.Pool

func TestMain(m *testing.M) {
	exe, err := browser.Find()
	if err == nil {
		pool = browser.New(exe, 2, 30*time.Second)
	}
	code := m.Run()
	if pool != nil {
		pool.Close()
	}
	os.Exit(code)
}

func need(t testing.TB) *browser.Pool {
	t.Helper()
	if pool == nil {
		t.Skip("no headless browser: install Chromium (.ci/run does) or set TOOLGATE_BROWSER")
	}
	return pool
}

const deck = `<!doctype html><style>body{margin:0} section{width:1280px;height:720px;box-sizing:border-box;padding:40px}</style>
<section><h1>One</h1></section><section style="background:#c00"><h1>Two</h1></section><section><h1>Three</h1></section>`

func TestDeckPages(t *testing.T) {
	p := need(t)
	var shots [][]byte
	var total int
	err := p.Page(context.Background(), deck, func(ctx context.Context) error {
		rects, n, err := browser.Pages(ctx, 10)
		if err != nil {
			return err
		}
		total = n
		shots, err = browser.Capture(ctx, rects)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Len(t, shots, 3)
	for _, s := range shots {
		img, err := jpeg.Decode(bytes.NewReader(s))
		require.NoError(t, err)
		require.Equal(t, 1280, img.Bounds().Dx())
		require.Equal(t, 720, img.Bounds().Dy())
	}
	second, err := jpeg.Decode(bytes.NewReader(shots[1]))
	require.NoError(t, err)
	r, g, b, _ := second.At(1200, 700).RGBA()
	require.Greater(t, r>>8, uint32(150), "the second slide is red")
	require.Less(t, g>>8+b>>8, uint32(100))
}

func TestNoNetwork(t *testing.T) {
	p := need(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	html := `<img src="` + srv.URL + `/img.png"><link rel=stylesheet href="` + srv.URL + `/s.css">` +
		`<script>fetch("` + srv.URL + `/fetch").catch(()=>{}); fetch("https://example.com/").catch(()=>{})</script><p>hi</p>`
	err := p.Page(context.Background(), html, func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Sleep(500*time.Millisecond))
	})
	require.NoError(t, err)
	require.Zero(t, hits.Load(), "the artifact reached nothing outside itself")
}

func TestDeadline(t *testing.T) {
	p := need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := p.Page(ctx, `<script>while(true){}</script>`, func(ctx context.Context) error {
		_, _, err := browser.Pages(ctx, 10)
		return err
	})
	require.Error(t, err)
	require.Less(t, time.Since(start), 15*time.Second, "a hung page does not wedge the call")
	// And the pool still renders.
	require.NoError(t, p.Page(context.Background(), deck, func(ctx context.Context) error {
		_, _, err := browser.Pages(ctx, 10)
		return err
	}))
}

func TestRestartAfterCrash(t *testing.T) {
	p := need(t)
	render := func() error {
		return p.Page(context.Background(), deck, func(ctx context.Context) error {
			_, _, err := browser.Pages(ctx, 10)
			return err
		})
	}
	require.NoError(t, render())
	before := p.Starts()
	require.NoError(t, p.Kill())
	require.NoError(t, render(), "a crashed browser is started again")
	require.Equal(t, before+1, p.Starts())
}

func TestFind(t *testing.T) {
	t.Setenv(browser.EnvBrowser, "/nonexistent/chromium")
	_, err := browser.Find()
	require.ErrorIs(t, err, browser.ErrNoBrowser)
}
