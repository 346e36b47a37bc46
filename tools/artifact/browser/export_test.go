package browser

import "github.com/chromedp/chromedp"

// PID is the running browser's process id, 0 while none runs: the
// benchmarks measure the memory of its process tree.
func (p *Pool) PID() int {
	p.mu.Lock()
	b := p.browser
	p.mu.Unlock()
	if b == nil {
		return 0
	}
	c := chromedp.FromContext(b)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		return 0
	}
	return c.Browser.Process().Pid
}
