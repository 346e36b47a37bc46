// Numbers, money and dates as people read them.

const whole = new Intl.NumberFormat('en');
const compact = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 });
const percent = new Intl.NumberFormat('en', { style: 'percent', maximumFractionDigits: 1 });

export const int = (n) => whole.format(Number(n) || 0);
export const short = (n) => compact.format(Number(n) || 0);
export const pct = (x) => percent.format(Number(x) || 0);

/** Money from an amount string (exact) or a number of dollars. */
export function usd(v) {
  const n = typeof v === 'object' && v !== null ? Number(v.amount) : Number(v) || 0;
  const digits = n === 0 || Math.abs(n) >= 0.1 ? 2 : Math.abs(n) >= 0.01 ? 3 : 4;
  return '$' + n.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Dollars of a Money. */
export const dollars = (m) => (m ? Number(m.micros) / 1e6 : 0);

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/** "2026-03" as "March 2026". */
export function monthName(ym) {
  const [y, m] = ym.split('-').map(Number);
  return `${MONTHS[m - 1]} ${y}`;
}

/** The month after (or before, with -1) "YYYY-MM". */
export function addMonth(ym, delta) {
  const [y, m] = ym.split('-').map(Number);
  const d = new Date(Date.UTC(y, m - 1 + delta, 1));
  return d.toISOString().slice(0, 7);
}

/** This calendar month in UTC, "YYYY-MM". */
export const thisMonth = () => new Date().toISOString().slice(0, 7);

/** When, in the reader's zone, to the minute. */
export function when(t) {
  if (!t) return '—';
  return new Date(t).toLocaleString('en-GB', { day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' });
}

/** How long between two times, as "850 ms", "4.2 s", "3 min 5 s". */
export function duration(from, to) {
  if (!from || !to) return '—';
  const ms = new Date(to) - new Date(from);
  if (ms < 1000) return `${Math.max(ms, 0)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** "1 tool call", "3 tool calls". */
export const plural = (n, one, many = one + 's') => `${int(n)} ${n === 1 ? one : many}`;
