package browser

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/chromedp/chromedp"
)

// Element is one element as measured on its page.
type Element struct {
	// Page is the slide or viewport-high page the element is on, from 1;
	// 0 for an element of a deck that is on no slide.
	Page int `json:"page"`
	// Element names it as a CSS selector would: tag#id.class.
	Element string `json:"element"`
	// Text is the start of its text.
	Text string `json:"text,omitempty"`
	Box  Rect   `json:"box"`
	// OverflowX and OverflowY are the CSS pixels of content that do not
	// fit the element's box (text that spills or is clipped).
	OverflowX float64 `json:"overflowX,omitempty"`
	OverflowY float64 `json:"overflowY,omitempty"`
	// Outside says the element reaches past its page: a slide's edges, or
	// the page's width.
	Outside bool `json:"outside,omitempty"`
}

// Matched is what one selector found.
type Matched struct {
	// Count is every element it matches; Elements holds at most the
	// number asked for.
	Count    int       `json:"count"`
	Elements []Element `json:"elements"`
	// Invalid is the browser's word on a selector it cannot parse.
	Invalid string `json:"invalid,omitempty"`
}

// measureJS measures elements: for each selector given (a JSON list), or
// for every element of the body when none is, their boxes, overflow and
// whether they reach past their page. With no selectors only the elements
// that overflow or reach past their page are kept.
const measureJS = `((sels, keep) => {
	const W = %d, H = %d;
	const slides = [...document.querySelectorAll('section')].filter(s => !s.parentElement.closest('section'));
	const sx = window.scrollX, sy = window.scrollY;
	const rect = el => { const r = el.getBoundingClientRect(); return {x: r.left + sx, y: r.top + sy, width: r.width, height: r.height}; };
	const pages = slides.map(rect);
	const docW = Math.max(document.documentElement.clientWidth, W);
	const slideOf = el => { let s = el.closest('section'), top = null; while (s) { top = s; s = s.parentElement && s.parentElement.closest('section'); } return top ? slides.indexOf(top) : -1; };
	const name = el => { let d = el.tagName.toLowerCase(); if (el.id) d += '#' + el.id; for (const c of el.classList) d += '.' + c; return d; };
	const measure = el => {
		const r = rect(el);
		let page, p;
		if (slides.length) { const i = slideOf(el); page = i + 1; p = i >= 0 ? pages[i] : null; }
		else { page = Math.floor(r.y / H) + 1; p = {x: 0, y: -Infinity, width: docW, height: Infinity}; }
		const out = {page: page, element: name(el), text: (el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60), box: r};
		if (el.clientWidth || el.clientHeight) {
			const ox = el.scrollWidth - el.clientWidth, oy = el.scrollHeight - el.clientHeight;
			if (ox > 1) out.overflowX = ox;
			if (oy > 1) out.overflowY = oy;
		}
		if (p && (r.width > 0 || r.height > 0) && (r.x < p.x - 1 || r.y < p.y - 1 || r.x + r.width > p.x + p.width + 1 || r.y + r.height > p.y + p.height + 1)) out.outside = true;
		return out;
	};
	if (!sels) {
		const all = [...document.body.querySelectorAll('*')].filter(el => !['SCRIPT', 'STYLE', 'BR'].includes(el.tagName)).map(measure);
		const bad = all.filter(m => m.overflowX || m.overflowY || m.outside);
		return [{count: bad.length, elements: bad.slice(0, keep)}];
	}
	return sels.map(sel => {
		let els;
		try { els = [...document.querySelectorAll(sel)]; } catch (e) { return {count: 0, elements: [], invalid: String(e.message || e)}; }
		return {count: els.length, elements: els.slice(0, keep).map(measure)};
	});
})(%s, %d)`

// Measure measures the elements each selector matches, keeping at most
// keep of each.
func Measure(ctx context.Context, selectors []string, keep int) ([]Matched, error) {
	sels, err := json.Marshal(selectors)
	if err != nil {
		return nil, fmt.Errorf("selectors: %w", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]Matched](fmt.Sprintf(measureJS, Width, Height, sels, keep)))
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	return out, nil
}

// Overflowing returns the elements whose content does not fit their box
// or that reach past their page, at most keep of them, and how many there
// are.
func Overflowing(ctx context.Context, keep int) ([]Element, int, error) {
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]Matched](fmt.Sprintf(measureJS, Width, Height, "null", keep)))
	if err != nil {
		return nil, 0, fmt.Errorf("find overflow: %w", err)
	}
	if len(out) != 1 {
		return nil, 0, fmt.Errorf("find overflow: %d answers", len(out))
	}
	return out[0].Elements, out[0].Count, nil
}

// slidePrintJS makes each slide of a deck one printed page of the slide's
// own size; a document without slides prints as it is. It answers the
// number of slides.
const slidePrintJS = `(() => {
	const slides = [...document.querySelectorAll('section')].filter(s => !s.parentElement.closest('section'));
	if (!slides.length) return 0;
	const r = slides[0].getBoundingClientRect();
	const st = document.createElement('style');
	st.textContent = '@page { size: ' + Math.round(r.width) + 'px ' + Math.round(r.height) + 'px; margin: 0 } ' +
		'html, body { margin: 0 !important; padding: 0 !important } ' +
		'* { -webkit-print-color-adjust: exact; print-color-adjust: exact }';
	document.head.appendChild(st);
	slides.forEach((s, i) => { s.style.breakInside = 'avoid'; s.style.breakAfter = i < slides.length - 1 ? 'page' : 'auto'; });
	return slides.length;
})()`

// PrintPDF prints the page to a PDF: a deck one slide per page, each page
// the slide's size; any other document on the default paper.
func PrintPDF(ctx context.Context) ([]byte, error) {
	slides, err := chromedp.Run(ctx, chromedp.Evaluate[int](slidePrintJS))
	if err != nil {
		return nil, fmt.Errorf("lay out for print: %w", err)
	}
	opts := []chromedp.PDFOption{chromedp.PDFPrintBackground()}
	if slides > 0 {
		opts = append(opts, chromedp.PDFPreferCSSPageSize())
	}
	pdf, err := chromedp.Run(ctx, chromedp.PrintToPDF(opts...))
	if err != nil {
		return nil, fmt.Errorf("print: %w", err)
	}
	return pdf, nil
}
