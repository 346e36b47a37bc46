// Package browser drives the headless Chromium the artifact review tools
// render in: found on PATH or named by TOOLGATE_BROWSER, started once and
// shared through a Pool that bounds the pages open at a time, gives every
// call a deadline, and starts the browser again when it has died.
//
// The browser has no network: every host resolves to nothing and every
// request goes to a proxy that does not exist, so an artifact reaches
// nothing but itself, which is written into a blank page.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// EnvBrowser names the browser executable, in place of a search of PATH.
const EnvBrowser = "TOOLGATE_BROWSER"

// ErrNoBrowser says no headless browser was found: the review tools are
// not offered.
var ErrNoBrowser = errors.New("no headless browser found: install Chromium or set " + EnvBrowser)

// names are the executables looked for on PATH, in order.
var names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell", "chrome"}

// Find returns the browser to drive: TOOLGATE_BROWSER when set (it must
// exist), else the first of the usual Chromium names on PATH.
func Find() (string, error) { return Lookup(os.Getenv(EnvBrowser)) }

// Lookup returns the browser named (a path, or a name on PATH; it must
// exist), or with no name the first of the usual Chromium names on PATH.
func Lookup(name string) (string, error) {
	if p := name; p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBrowser, p, ErrNoBrowser)
		}
		return path, nil
	}
	for _, n := range names {
		if path, err := exec.LookPath(n); err == nil {
			return path, nil
		}
	}
	return "", ErrNoBrowser
}

// Defaults of a Pool.
const (
	// DefaultPages bounds the pages open at once.
	DefaultPages = 2
	// DefaultTimeout bounds one call, waiting for a page included.
	DefaultTimeout = 30 * time.Second
	// Width and Height are the viewport a page renders in: a 16:9 slide.
	Width, Height = 1280, 720
)

// Pool is one browser shared by every call, started on first use.
type Pool struct {
	exe     string
	timeout time.Duration
	pages   chan struct{}

	mu      sync.Mutex
	browser context.Context // the chromedp browser context; nil until started
	stop    func()
	starts  int
}

// New returns a pool over the browser at exe, opening at most pages pages
// at once (0: DefaultPages), each call bounded by timeout (0: DefaultTimeout).
func New(exe string, pages int, timeout time.Duration) *Pool {
	if pages <= 0 {
		pages = DefaultPages
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Pool{exe: exe, timeout: timeout, pages: make(chan struct{}, pages)}
}

// Name is the browser's executable name (not its path).
func (p *Pool) Name() string { return filepath.Base(p.exe) }

// Starts reports how many times the browser was started: once, plus once
// for each time it was found dead.
func (p *Pool) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Close stops the browser.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		p.stop()
		p.browser, p.stop = nil, nil
	}
}

// running returns the live browser, starting it when there is none or the
// last one died (its context ends when the connection is lost).
func (p *Pool) running() (context.Context, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.browser != nil && p.browser.Err() == nil {
		return p.browser, nil
	}
	if p.stop != nil {
		p.stop()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(p.exe),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		// No network: no name resolves, and every request, loopback
		// included, goes to a proxy that is not there.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.Flag("proxy-server", "127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.WindowSize(Width, Height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Start the browser now, so a broken one fails this call, not later.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, fmt.Errorf("start browser: %w", err)
	}
	p.browser = bctx
	p.stop = func() { cancelBrowser(); cancelAlloc() }
	p.starts++
	return bctx, nil
}

// Kill ends the browser process abruptly, as a crash would: for tests of
// the restart.
func (p *Pool) Kill() error {
	p.mu.Lock()
	b := p.browser
	p.mu.Unlock()
	if b == nil {
		return nil
	}
	c := chromedp.FromContext(b)
	if c == nil || c.Browser == nil {
		return nil
	}
	if err := c.Browser.Process().Kill(); err != nil {
		return fmt.Errorf("kill browser: %w", err)
	}
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
	}
	return nil
}

// Page renders html in a new blank page (Width × Height) and runs fn on
// it; the page is closed after. It waits for a free page, within the
// call's deadline; a browser found dead is started again, once.
func (p *Pool) Page(ctx context.Context, html string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	select {
	case p.pages <- struct{}{}:
		defer func() { <-p.pages }()
	case <-ctx.Done():
		return fmt.Errorf("wait for a browser page: %w", ctx.Err())
	}
	err := p.tab(ctx, html, fn)
	if err != nil && ctx.Err() == nil && p.dead() {
		// The browser died under the call: one more try on a new one.
		err = p.tab(ctx, html, fn)
	}
	return err
}

// dead reports whether the current browser has gone.
func (p *Pool) dead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.browser == nil || p.browser.Err() != nil
}

func (p *Pool) tab(ctx context.Context, html string, fn func(ctx context.Context) error) error {
	bctx, err := p.running()
	if err != nil {
		return err
	}
	tctx, closeTab := chromedp.NewContext(bctx)
	defer closeTab()
	// The tab lives on the browser's context; the call's deadline ends it.
	stop := context.AfterFunc(ctx, closeTab)
	defer stop()
	if err := chromedp.Do(tctx, chromedp.Navigate("about:blank")); err != nil {
		return fmt.Errorf("open page: %w", err)
	}
	tree, err := chromedp.Call(tctx, page.GetFrameTree, struct{}{})
	if err != nil {
		return fmt.Errorf("read frame: %w", err)
	}
	if _, err := chromedp.Call(tctx, page.SetDocumentContent, page.SetDocumentContentParams{FrameID: tree.FrameTree.Frame.ID, HTML: html}); err != nil {
		return fmt.Errorf("write page: %w", err)
	}
	if err := fn(tctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("render: %w", ctx.Err())
		}
		return err
	}
	return nil
}
