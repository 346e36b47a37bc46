// Package browsertest starts headless Chromium for the tests that drive
// toolgate's pages (the playground, the admin console, a portal on another
// origin) in a real browser.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Find returns the Chromium to drive: TOOLGATE_BROWSER, or one on PATH.
// CI installs Debian's; elsewhere a machine without one skips the test.
func Find(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TOOLGATE_BROWSER"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium on PATH: CI must install it")
	}
	t.Skip("no Chromium on PATH")
	return ""
}

// Options is how every browser test starts Chromium: headless, with no
// network but host, in a profile of its own; extra adds to it.
func Options(t testing.TB, exe, host string, extra ...chromedp.ExecAllocatorOption) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		// The network is cut: no host resolves but the server's.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE "+host),
		chromedp.UserDataDir(t.TempDir()),
	)
	return append(opts, extra...)
}

// Start opens a tab in a new headless Chromium (Options with extra), for
// at most timeout, closed when the test ends. listen, when not nil, hears
// every event of the tab (requests, failures).
func Start(t testing.TB, exe, host string, timeout time.Duration, listen func(ev any), extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), Options(t, exe, host, extra...)...)
	var opts []chromedp.ContextOption
	if listen != nil {
		opts = append(opts, chromedp.WithListener(listen))
	}
	ctx, cancelTab := chromedp.NewContext(actx, opts...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc()
	})
	return ctx
}
