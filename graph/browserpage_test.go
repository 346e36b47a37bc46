package graph_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/graph/browsertest"
)

// page is a browser tab a test drives: every step fails the test on an
// error, and waits give the page browserWait.
type page struct {
	t   *testing.T
	ctx context.Context
	net *netLog
}

// openPage starts Chromium (browsertest.Start) on host for at most
// timeout, recording what the tab asks for.
func openPage(t *testing.T, exe, host string, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) *page {
	t.Helper()
	p := &page{t: t, net: &netLog{}}
	p.ctx = browsertest.Start(t, exe, host, timeout, p.net.listen, extra...)
	_, err := chromedp.Call(p.ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	return p
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx, steps...))
}

func (p *page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	require.NoError(p.t, err, expr)
	return v
}

// count is how many elements match sel.
func (p *page) count(sel string) int {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+quote(sel)+`).length`))
	require.NoError(p.t, err, sel)
	return v
}

// wait waits until the page holds text in sel; failing, it says what sel
// held instead.
func (p *page) wait(sel, text string) {
	p.t.Helper()
	deadline := time.Now().Add(browserWait)
	var err error
	for {
		_, err = chromedp.Run(p.ctx, chromedp.Poll[bool](`(() => { const e = document.querySelector(`+quote(sel)+`); return !!e && e.textContent.includes(`+quote(text)+`) })()`,
			chromedp.WithPollingTimeout(time.Until(deadline))))
		// A navigation that replaces the page mid-poll ends the poll's
		// context, not the wait: poll the new page.
		if err == nil || !strings.Contains(err.Error(), "Cannot find context with specified id") || time.Until(deadline) <= 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		held, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+quote(sel)+`); return e ? e.textContent : '(no such element)' })()`))
		require.NoError(p.t, err, "%s shows %q; it shows %q", sel, text, held)
	}
}

// gone waits until nothing matches sel.
func (p *page) gone(sel string) {
	p.t.Helper()
	require.Eventually(p.t, func() bool { return p.count(sel) == 0 }, browserWait, 100*time.Millisecond, "%s is gone", sel)
}

func (p *page) click(sel string) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx, chromedp.Click(sel)), sel)
}

// onlyServer checks that the tab reached nothing but server (data: URLs
// aside) and that every request it made succeeded.
func (p *page) onlyServer(server string) {
	p.t.Helper()
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	for _, u := range p.net.requests {
		if strings.HasPrefix(u, "data:") {
			continue
		}
		require.True(p.t, strings.HasPrefix(u, server), "only the server is reached: %s", u)
	}
	require.Empty(p.t, p.net.failed, "every request the page made succeeded")
}

// netLog is what a tab asked for and what failed.
type netLog struct {
	mu       sync.Mutex
	requests []string
	failed   []string
}

func (l *netLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		l.requests = append(l.requests, e.Request.URL)
	case *network.EventLoadingFailed:
		l.failed = append(l.failed, e.ErrorText)
	}
}
