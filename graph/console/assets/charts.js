// Charts drawn as SVG by hand: a few hundred lines instead of a charting
// library, no canvas, no inline style, and they print and scale crisply.

import { h } from 'preact';
import htm from 'htm';

const html = htm.bind(h);

/** Colours for series in order; the last repeats past the end. */
export const PALETTE = ['#4f46e5', '#0d9488', '#f59e0b', '#e11d48', '#0284c7', '#7c3aed', '#65a30d', '#ea580c', '#db2777', '#475569',
  '#0891b2', '#ca8a04', '#9333ea', '#16a34a', '#be123c', '#1e40af'];

/** The colours of the four kinds of tokens. */
export const TOKEN_KINDS = [
  { key: 'inputTokens', name: 'Input (uncached)', color: '#4f46e5' },
  { key: 'cacheReadTokens', name: 'Cache read', color: '#0d9488' },
  { key: 'cacheWriteTokens', name: 'Cache write', color: '#f59e0b' },
  { key: 'outputTokens', name: 'Output', color: '#e11d48' },
];

/** Round tick values from 0 past max, about count of them. */
export function ticks(max, count = 4) {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let v = 0; v < max + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/** A legend of coloured keys. */
export function Legend({ series }) {
  return html`<ul class="legend">
    ${series.map((s) => html`<li key=${s.name}><span class="swatch" ref=${paint(s.color)}></span>${s.name}</li>`)}
  </ul>`;
}

/** A ref that sets an element's background colour through the CSSOM (no inline style attribute). */
export function paint(color) {
  return (el) => { if (el) el.style.backgroundColor = color; };
}

/**
 * Columns stacked by series: labels along the bottom, one column per label,
 * each series a segment. series: [{name, color, values: [number per label]}].
 */
export function StackedColumns({ labels, series, format, titles, height = 240, id }) {
  const W = 960, H = height, left = 64, right = 12, top = 12, bottom = 28;
  const totals = labels.map((_, i) => series.reduce((s, x) => s + (x.values[i] || 0), 0));
  const max = Math.max(...totals, 0);
  const ys = ticks(max);
  const top_ = ys[ys.length - 1] || 1;
  const plotW = W - left - right, plotH = H - top - bottom;
  const band = plotW / Math.max(labels.length, 1);
  const barW = Math.max(2, Math.min(28, band * 0.7));
  const y = (v) => top + plotH - (v / top_) * plotH;
  const every = labels.length > 20 ? 2 : 1;
  return html`<svg class="chart" id=${id} viewBox="0 0 ${W} ${H}" role="img" aria-label=${titles?.chart || 'chart'}>
    ${ys.map((v) => html`<g key=${'y' + v}>
      <line class="grid" x1=${left} x2=${W - right} y1=${y(v)} y2=${y(v)} />
      <text class="tick" x=${left - 8} y=${y(v) + 4} text-anchor="end">${format(v)}</text>
    </g>`)}
    ${labels.map((label, i) => {
      const x = left + band * i + (band - barW) / 2;
      let acc = 0;
      return html`<g key=${label} class="column">
        ${series.map((s) => {
          const v = s.values[i] || 0;
          if (v <= 0) return null;
          const y0 = y(acc), y1 = y(acc + v);
          acc += v;
          return html`<rect key=${s.name} x=${x} y=${y1} width=${barW} height=${Math.max(y0 - y1, 0.5)} fill=${s.color}>
            <title>${(titles?.label ? titles.label(i) : label) + ' · ' + s.name + ': ' + format(v)}</title>
          </rect>`;
        })}
        ${i % every === 0 ? html`<text class="tick" x=${x + barW / 2} y=${H - 8} text-anchor="middle">${label}</text>` : null}
        <rect class="hit" x=${left + band * i} y=${top} width=${band} height=${plotH}>
          <title>${(titles?.label ? titles.label(i) : label) + ': ' + format(totals[i])}</title>
        </rect>
      </g>`;
    })}
    <line class="axis" x1=${left} x2=${W - right} y1=${y(0)} y2=${y(0)} />
  </svg>`;
}

/**
 * Horizontal stacked bars against limits: rows [{label, segments:
 * [{name, color, value}], total}], limits [{label, value}] drawn as lines
 * across every row.
 */
export function CeilingBars({ rows, limits, format, id }) {
  const W = 960, rowH = 34, gap = 18, left = 190, right = 24, top = 30, bottom = 26;
  const H = top + rows.length * (rowH + gap) - gap + bottom;
  const max = Math.max(...rows.map((r) => r.total), ...limits.map((l) => l.value)) * 1.04;
  const xs = ticks(max, 6);
  const end = xs[xs.length - 1];
  const plotW = W - left - right;
  const x = (v) => left + (v / end) * plotW;
  return html`<svg class="chart" id=${id} viewBox="0 0 ${W} ${H}" role="img" aria-label="catalogue against the ceilings">
    ${xs.map((v) => html`<g key=${'x' + v}>
      <line class="grid" x1=${x(v)} x2=${x(v)} y1=${top - 6} y2=${H - bottom} />
      <text class="tick" x=${x(v)} y=${H - 8} text-anchor="middle">${format(v)}</text>
    </g>`)}
    ${rows.map((r, i) => {
      const y0 = top + i * (rowH + gap);
      let acc = 0;
      return html`<g key=${r.label}>
        <text class="row-label" x=${left - 10} y=${y0 + rowH / 2 + 5} text-anchor="end">${r.label}</text>
        <rect class="track" x=${left} y=${y0} width=${plotW} height=${rowH} rx="4" />
        ${r.segments.map((s) => {
          const x0 = x(acc);
          acc += s.value;
          return html`<rect key=${s.name} x=${x0} y=${y0} width=${Math.max(x(acc) - x0, 0)} height=${rowH} fill=${s.color} class="segment">
            <title>${`${r.label} · ${s.name}: ${format(s.value)} characters`}</title>
          </rect>`;
        })}
        <text class="bar-value" x=${Math.min(x(r.total) + 6, W - right - 4)} y=${y0 + rowH / 2 + 5} text-anchor=${x(r.total) + 90 > W ? 'end' : 'start'}>${format(r.total)}</text>
      </g>`;
    })}
    ${limits.map((l) => html`<g key=${l.label} class="limit">
      <line x1=${x(l.value)} x2=${x(l.value)} y1=${top - 14} y2=${H - bottom} />
      <text x=${x(l.value) - 4} y=${top - 16} text-anchor="end">${l.label} ${format(l.value)}</text>
    </g>`)}
  </svg>`;
}

/** One horizontal bar of stacked segments in HTML, width relative to max. */
export function Meter({ segments, max, label }) {
  const total = segments.reduce((s, x) => s + x.value, 0);
  return html`<div class="meter" title=${label}>
    <div class="meter-fill" ref=${(el) => { if (el) el.style.width = `${max > 0 ? (total / max) * 100 : 0}%`; }}>
      ${segments.map((s) => s.value > 0 ? html`<span key=${s.name} title=${s.title || s.name}
        ref=${(el) => { if (el) { el.style.flexGrow = String(s.value); el.style.backgroundColor = s.color; } }}></span>` : null)}
    </div>
  </div>`;
}
