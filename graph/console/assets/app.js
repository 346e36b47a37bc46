// The admin console: catalogue, cost and ratings, budgets, turns and
// transcripts, agents, knowledge and skills, people and tokens, through the public GraphQL API (and the
// usage export) with the signed-in API token.

import { h, render } from 'preact';
import { useState, useEffect, useCallback, useMemo } from 'preact/hooks';
import htm from 'htm';
import { gql, followTurn, session, takeTokenFromAddress, Unauthenticated, downloadUsage } from './api.js';
import { StackedColumns, CeilingBars, Meter, Legend, PALETTE, TOKEN_KINDS, paint } from './charts.js';
import { int, short, pct, usd, dollars, monthName, addMonth, thisMonth, when, duration, plural } from './format.js';

const html = htm.bind(h);

// What the Content-Security-Policy refused, for the tests to read.
window.cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.cspViolations.push(`${e.violatedDirective}: ${e.blockedURI}`);
});

takeTokenFromAddress();

// Sign-out is global: any request the API refuses with 401 lands here.
let signOutHandler = () => {};
const refused = (err) => { if (err instanceof Unauthenticated) signOutHandler(err.message); };

/** Runs an operation when its variables change: {data, error, loading, reload}. */
function useQuery(name, variables) {
  const key = JSON.stringify(variables || {});
  const [state, setState] = useState({ loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ loading: true, data: s.key === key ? s.data : undefined, key }));
    gql(name, variables).then(
      (data) => live && setState({ data, key }),
      (error) => { if (!live) return; refused(error); setState({ error, key }); },
    );
    return () => { live = false; };
  }, [name, key, n]);
  return { ...state, reload: useCallback(() => setN((x) => x + 1), []) };
}

// ---- routing: #/catalogue, #/cost/2026-03, #/turns, #/conversations/ID

function parseRoute() {
  const [view = 'catalogue', arg] = location.hash.replace(/^#\/?/, '').split('/');
  return { view, arg: arg ? decodeURIComponent(arg) : undefined };
}

function useRoute() {
  const [route, setRoute] = useState(parseRoute);
  useEffect(() => {
    const on = () => setRoute(parseRoute());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

// ---- states every view shares

function Loading({ what }) {
  return html`<div class="state loading" role="status"><span class="spinner"></span>Loading ${what}…</div>`;
}

function Failed({ error, retry }) {
  return html`<div class="state error" role="alert">
    <strong>Could not load this.</strong> <span class="error-text">${error.message}</span>
    ${retry ? html`<button class="ghost" onClick=${retry}>Try again</button>` : null}
  </div>`;
}

function Empty({ children }) {
  return html`<div class="state empty">${children}</div>`;
}

function Card({ label, value, sub, tone }) {
  return html`<div class=${'card stat ' + (tone || '')}>
    <div class="stat-label">${label}</div>
    <div class="stat-value">${value}</div>
    ${sub ? html`<div class="stat-sub">${sub}</div>` : null}
  </div>`;
}

function Panel({ title, aside, children, id }) {
  return html`<section class="card panel" id=${id}>
    <header class="panel-head"><h2>${title}</h2>${aside ? html`<div class="panel-aside">${aside}</div>` : null}</header>
    ${children}
  </section>`;
}

// ---- sign-in

const SIGNED_OUT = 'Signed out: the token is forgotten in this tab.';

function SignIn({ message, onToken }) {
  const [token, setToken] = useState('');
  const submit = (e) => {
    e.preventDefault();
    if (token.trim()) onToken(token.trim());
  };
  return html`<main class="signin">
    <form class="card signin-card" onSubmit=${submit}>
      <div class="brand big"><span class="logo"></span>toolgate <span class="brand-sub">admin</span></div>
      <p class="muted">Sign in with an API token. It is kept in this tab only (session storage) and sent to this server's GraphQL API, nowhere else.</p>
      ${message ? html`<div class=${'state ' + (message === SIGNED_OUT ? 'info' : 'error')} role="alert" id="signin-message">${message}</div>` : null}
      <label for="token">API token</label>
      <input id="token" type="password" autocomplete="off" spellcheck="false" placeholder="tg_…" value=${token} onInput=${(e) => setToken(e.target.value)} />
      <button type="submit" class="primary" id="signin">Sign in</button>
      <p class="hint"><code>make run</code> prints a demo token and a link that signs in with it; <code>toolgate bootstrap</code> prints one for a new organisation.</p>
    </form>
  </main>`;
}

// ---- catalogue

function familyColors(tools) {
  const families = [...new Set(tools.map((t) => t.family))];
  return Object.fromEntries(families.map((f, i) => [f, PALETTE[i % PALETTE.length]]));
}

function segmentsByFamily(tools, colors) {
  const sums = new Map();
  for (const t of tools) sums.set(t.family, (sums.get(t.family) || 0) + t.definitionChars);
  return [...sums].map(([name, value]) => ({ name, value, color: colors[name] }));
}

function CatalogueView() {
  const agents = useQuery('agents');
  const list = agents.data?.agents.edges.map((e) => e.node) || [];
  const [picked, setPicked] = useState(undefined);
  const agentId = picked === undefined ? list[0]?.id || null : picked;
  const ready = !agents.loading || agents.data;
  return html`<div class="view">
    <div class="toolbar">
      <h1>Catalogue</h1>
      <label class="picker">Agent
        <select id="agent" value=${agentId || ''} onChange=${(e) => setPicked(e.target.value || null)}>
          ${list.map((a) => html`<option key=${a.id} value=${a.id}>${a.name}</option>`)}
          <option value="">No agent: the always-on tools</option>
        </select>
      </label>
    </div>
    ${agents.error ? html`<${Failed} error=${agents.error} retry=${agents.reload} />` : null}
    ${ready ? html`<${Catalogue} agentId=${agentId} agentName=${list.find((a) => a.id === agentId)?.name} />` : html`<${Loading} what="agents" />`}
  </div>`;
}

// The reason of every tool an agent does not list: told by the dimmed row
// (and its tooltip), so the rows spell out only the reasons worth a look.
const NOT_LISTED = "not in the agent's tools";

function Catalogue({ agentId, agentName }) {
  const q = useQuery('catalogue', { agentId });
  if (q.error) return html`<${Failed} error=${q.error} retry=${q.reload} />`;
  if (!q.data) return html`<${Loading} what="the catalogue" />`;
  const c = q.data.catalogue;
  const colors = familyColors(c.tools);
  // Application tools are offered as <application>__<tool>; the widest catalogue is the built-in tools'.
  const builtIn = c.tools.filter((t) => !t.name.includes('__'));
  const widestRoom = c.ceilings.widestChars - c.widestChars;
  const paidRoom = c.ceilings.alwaysPaidChars - c.alwaysPaidChars;
  const offered = c.tools.filter((t) => t.offered);
  const rows = [
    { label: 'Every turn pays', segments: segmentsByFamily(c.tools.filter((t) => t.alwaysOn), colors), total: c.alwaysPaidChars },
    { label: agentName ? 'This agent’s deck' : 'No agent', segments: segmentsByFamily(offered, colors), total: c.offeredChars },
    { label: 'Widest catalogue', segments: segmentsByFamily(builtIn, colors), total: c.widestChars },
  ];
  const families = [...new Set(c.tools.map((t) => t.family))];
  const maxTool = Math.max(...c.tools.map((t) => t.definitionChars), 1);
  return html`<div id="catalogue">
    <div class="stats">
      <${Card} label="Widest catalogue" value=${int(c.widestChars)} sub=${`characters · ${int(c.widestTokens)} tokens; ceiling ${int(c.ceilings.widestChars)}`} />
      <${Card} label="Headroom (widest)" value=${int(widestRoom)} sub="characters left under the ceiling" tone=${widestRoom < 0 ? 'bad' : widestRoom < 2000 ? 'warn' : 'good'} />
      <${Card} label="Every turn pays" value=${int(c.alwaysPaidChars)} sub=${`characters · ${int(c.alwaysPaidTokens)} tokens; ceiling ${int(c.ceilings.alwaysPaidChars)}`} />
      <${Card} label="Headroom (always paid)" value=${int(paidRoom)} sub="characters left under the ceiling" tone=${paidRoom < 0 ? 'bad' : paidRoom < 1000 ? 'warn' : 'good'} />
      <${Card} label=${agentName ? 'This agent’s deck' : 'Offered'} value=${int(c.offeredChars)} sub=${`characters · ${int(c.offeredTokens)} tokens; ${plural(offered.length, 'tool')}`} />
      ${c.deferring ? html`<${Card} label="Sent each call (deferred)" value=${int(c.sentChars)} sub=${`characters · ${int(c.sentTokens)} tokens; ${plural(offered.filter((t) => t.deferred).length, 'tool')} as stubs`} />` : null}
      <${Card} label="Application tools" value=${int(c.applicationChars)} sub=${`characters · ${int(c.applicationTokens)} tokens of the deck`} />
      <${Card} label="Guidance" value=${int(c.guidanceChars)} sub=${`characters · ${int(c.guidanceTokens)} tokens; outside the ceilings`} />
    </div>
    ${c.warnings.length ? html`<div class="state warn" role="alert"><strong>Needs a look:</strong><ul>${c.warnings.map((w) => html`<li key=${w}>${w}</li>`)}</ul></div>` : null}
    <${Panel} title="Against the ceilings" id="ceilings" aside=${html`<span class="muted">characters of tool definitions, by family</span>`}>
      <${CeilingBars} id="ceiling-chart" rows=${rows} format=${int}
        limits=${[{ label: 'always-paid ceiling', value: c.ceilings.alwaysPaidChars }, { label: 'widest ceiling', value: c.ceilings.widestChars }]} />
      <${Legend} series=${families.map((f) => ({ name: f, color: colors[f] }))} />
    <//>
    <${Panel} title="Every tool" id="tools" aside=${html`<span class="muted">definition size as the model receives it; tokens are o200k_base</span>`}>
      <div class="tool-chart" id="tool-chart">
        ${families.map((f) => {
          const tools = c.tools.filter((t) => t.family === f);
          const sum = tools.reduce((s, t) => s + t.definitionChars, 0);
          return html`<div class="family" key=${f}>
            <div class="family-head"><span class="swatch" ref=${paint(colors[f])}></span><strong>${f}</strong>
              <span class="muted">${plural(tools.length, 'tool')} · ${int(sum)} chars</span></div>
            ${tools.map((t) => html`<div class=${'tool-row' + (t.offered ? '' : ' dim')} key=${t.name} title=${agentName && t.notOfferedReason ? 'not offered: ' + t.notOfferedReason : null}>
              <code class="tool-name">${t.name}</code>
              <${Meter} max=${maxTool} label=${`${t.definitionChars} characters`} segments=${[{ name: t.name, value: t.definitionChars, color: colors[f] }]} />
              <span class="tool-size">${int(t.definitionChars)} <span class="muted">chars</span> · ${int(t.definitionTokens)} <span class="muted">tok</span></span>
              <span class="tags">
                ${t.alwaysOn ? html`<span class="tag always">always</span>` : t.name.includes('__') ? html`<span class="tag app">application</span>` : html`<span class="tag">${t.offeredWhen.replaceAll('_', ' ')}</span>`}
                ${t.offered ? html`<span class="tag offered">offered</span>` : null}
                ${t.deferred ? html`<span class="tag" title=${`sent as a ${int(t.stubChars)}-character stub; read whole with get_tool_schema`}>deferred</span>` : null}
              </span>
              ${agentName && t.notOfferedReason && t.notOfferedReason !== NOT_LISTED ? html`<span class="tool-why">not offered: ${t.notOfferedReason}</span>` : null}
            </div>`)}
          </div>`;
        })}
      </div>
    <//>
  </div>`;
}

// ---- cost

const DIMENSIONS = {
  model: { label: 'Model', list: 'byModel', name: (g) => (g.estimated ? g.model + ' (estimated)' : g.model) },
  agent: { label: 'Agent', list: 'byAgent', name: (g) => g.agent?.name || 'a deleted agent' },
  user: { label: 'User', list: 'byUser', name: (g) => g.user?.name || 'a deleted user' },
};

function CostView({ month, viewer }) {
  const m = /^\d{4}-\d{2}$/.test(month || '') ? month : thisMonth();
  const go = (ym) => { location.hash = '#/cost/' + ym; };
  const usage = useQuery('usage', { month: m });
  const next = addMonth(m, 1);
  const [exported, setExported] = useState('');
  const exportCSV = () => {
    setExported('Exporting…');
    downloadUsage(m).then(
      (r) => setExported(`Downloaded ${r.name} (${plural(r.rows, 'row')}: one per user, agent and model)`),
      (err) => { refused(err); setExported('The export failed: ' + err.message); },
    );
  };
  return html`<div class="view">
    <div class="toolbar">
      <h1>Cost</h1>
      <button class="ghost" id="export-csv" title="This month's usage per user, agent and model, as CSV" onClick=${exportCSV}>Export CSV</button>
      ${exported ? html`<span class="muted" id="export-status">${exported}</span>` : null}
      <div class="month-picker">
        <button class="ghost" id="prev-month" title="The month before" onClick=${() => go(addMonth(m, -1))}>‹</button>
        <input type="month" id="month" value=${m} onChange=${(e) => e.target.value && go(e.target.value)} />
        <button class="ghost" id="next-month" title="The month after" onClick=${() => go(next)}>›</button>
      </div>
    </div>
    <p class="muted utc" id="utc-note">Calendar months in UTC: ${monthName(m)} runs from ${m}-01 00:00 UTC to ${next}-01 00:00 UTC, whatever your own time zone; days are UTC days.
      ${viewer.admin ? ' You see the whole organisation.' : ' You see your own usage; the organisation’s is for admins.'}</p>
    ${usage.error ? html`<${Failed} error=${usage.error} retry=${usage.reload} />` : !usage.data ? html`<${Loading} what=${'the cost of ' + monthName(m)} />` : html`<${Usage} usage=${usage.data.usage} />`}
    <${Ratings} month=${m} />
    <${Budgets} />
  </div>`;
}

function Usage({ usage }) {
  const [dim, setDim] = useState('model');
  const t = usage.totals;
  const days = usage.days;
  const labels = days.map((d) => String(Number(d.date.slice(8))));
  const titles = { label: (i) => days[i].date };
  const d = DIMENSIONS[dim];
  const names = useMemo(() => {
    const total = new Map();
    for (const g of usage[d.list]) total.set(d.name(g), (total.get(d.name(g)) || 0) + dollars(g.totals.cost));
    return [...total].sort((a, b) => b[1] - a[1]).map(([n]) => n);
  }, [usage, dim]);
  const costSeries = names.map((name, i) => ({
    name, color: PALETTE[i % PALETTE.length],
    values: days.map((day) => day[d.list].filter((g) => d.name(g) === name).reduce((s, g) => s + dollars(g.totals.cost), 0)),
  }));
  const tokenSeries = TOKEN_KINDS.map((k) => ({ ...k, values: days.map((day) => Number(day.totals[k.key])) }));
  const empty = Number(t.modelCalls) === 0;
  return html`<div id="usage">
    <div class="stats">
      <${Card} label=${usage.estimated ? 'Cost (estimated)' : 'Cost'} value=${usd(t.cost)} sub=${plural(Number(t.modelCalls), 'model call')} />
      ${TOKEN_KINDS.map((k) => html`<${Card} key=${k.key} label=${k.name + ' tokens'} value=${short(t[k.key])} sub=${int(t[k.key])} />`)}
      <${Card} label="Read from cache" value=${pct(usage.cachedShare)} sub="of all input tokens" />
      <${Card} label="Stable prefix" value=${pct(usage.prefixShare)} sub="of input: system prompt and tool definitions" />
    </div>
    ${usage.estimated ? html`<p class="muted" id="estimated-note">Replayed model calls are estimates: their tokens are counted with the o200k tokenizer and priced at gpt-4.1's list price, not billed by a provider.</p>` : null}
    ${empty ? html`<${Empty}>No model calls in ${monthName(usage.month)}. Pick another month, or send a message to an agent.<//>` : html`
    <${Panel} title="Cost by day" id="cost-by-day" aside=${html`<div class="segmented" role="tablist">
        ${Object.entries(DIMENSIONS).map(([k, v]) => html`<button key=${k} id=${'by-' + k} role="tab" aria-selected=${dim === k} class=${dim === k ? 'on' : ''} onClick=${() => setDim(k)}>by ${v.label.toLowerCase()}</button>`)}
      </div>`}>
      <${StackedColumns} id="cost-chart" labels=${labels} series=${costSeries} format=${usd} titles=${titles} />
      <${Legend} series=${costSeries} />
    <//>
    <${Panel} title="Tokens by day" id="tokens-by-day">
      <${StackedColumns} id="token-chart" labels=${labels} series=${tokenSeries} format=${short} titles=${titles} />
      <${Legend} series=${TOKEN_KINDS} />
    <//>
    <div class="grid3">
      ${Object.entries(DIMENSIONS).map(([k, v]) => html`<${Breakdown} key=${k} id=${'breakdown-' + k} title=${'By ' + v.label.toLowerCase()} groups=${usage[v.list]} name=${v.name} />`)}
    </div>`}
  </div>`;
}

function Breakdown({ id, title, groups, name }) {
  const sorted = [...groups].sort((a, b) => dollars(b.totals.cost) - dollars(a.totals.cost));
  const tokens = (g) => TOKEN_KINDS.reduce((s, k) => s + Number(g.totals[k.key]), 0);
  const max = Math.max(...sorted.map(tokens), 1);
  return html`<${Panel} title=${title} id=${id}>
    ${sorted.length === 0 ? html`<p class="muted">None.</p>` : html`<div class="breakdown">
      ${sorted.map((g) => html`<div class="breakdown-row" key=${name(g)}>
        <div class="breakdown-head"><span class="breakdown-name">${name(g)}</span><strong>${usd(g.totals.cost)}</strong></div>
        <${Meter} max=${max} label=${`${int(tokens(g))} tokens`} segments=${TOKEN_KINDS.map((k) => ({ name: k.name, color: k.color, value: Number(g.totals[k.key]), title: `${k.name}: ${int(g.totals[k.key])}` }))} />
        <div class="breakdown-sub muted">${short(tokens(g))} tokens · ${plural(Number(g.totals.modelCalls), 'call')}</div>
      </div>`)}
    </div>`}
  <//>`;
}

// Ratings: the month's thumbs up and down on answers, by agent and by the
// model that answered, with the latest comments.
function Ratings({ month }) {
  const q = useQuery('ratings', { month });
  let body;
  if (q.error) body = html`<${Failed} error=${q.error} retry=${q.reload} />`;
  else if (!q.data) body = html`<${Loading} what="ratings" />`;
  else {
    const r = q.data.ratings;
    const share = (g) => (g.up + g.down ? pct(g.up / (g.up + g.down)) : '–');
    const table = (id, head, rows, name) => html`<table class="table" id=${id}>
      <thead><tr><th>${head}</th><th class="num">Up</th><th class="num">Down</th><th class="num">Up share</th></tr></thead>
      <tbody>${rows.map((g) => html`<tr key=${name(g)}><td>${name(g)}</td><td class="num">${int(g.up)}</td><td class="num">${int(g.down)}</td><td class="num">${share(g)}</td></tr>`)}</tbody>
    </table>`;
    body = r.up + r.down === 0 ? html`<p class="muted">No answers rated in ${monthName(r.month)}.</p>` : html`
      <p class="muted" id="ratings-total">${plural(r.up, 'rating')} up, ${int(r.down)} down (${share(r)} up).</p>
      <div class="grid3">
        ${table('ratings-by-agent', 'Agent', r.byAgent, (g) => g.agent?.name || 'a deleted agent')}
        ${table('ratings-by-model', 'Model', r.byModel, (g) => g.model || 'no model call')}
        <div id="ratings-comments">${r.comments.length === 0 ? html`<p class="muted">No comments.</p>` : r.comments.map((c) => html`<div class="comment" key=${c.turn.id + c.rating.updatedAt}>
          <span class=${'chip ' + (c.rating.rating === 'UP' ? 'hits' : 'error')}>${c.rating.rating === 'UP' ? 'up' : 'down'}</span>
          <a href=${'#/conversations/' + encodeURIComponent(c.turn.conversation.id)}>${c.turn.conversation.title || 'Untitled'} #${c.turn.number}</a>
          <span class="muted"> ${c.rating.user?.name || ''}</span><div>${c.rating.comment}</div></div>`)}</div>
      </div>`;
  }
  return html`<${Panel} title="Ratings" id="ratings" aside=${html`<span class="muted">thumbs up and down on answers (rateTurn), ${monthName(month)}, UTC</span>`}>${body}<//>`;
}

function Budgets() {
  const q = useQuery('budgets');
  let body;
  if (q.error) body = html`<${Failed} error=${q.error} retry=${q.reload} />`;
  else if (!q.data) body = html`<${Loading} what="budgets" />`;
  else if (q.data.budgets.length === 0) body = html`<${Empty}>No budgets set. An admin sets them with <code>setBudget</code>: the organisation's, or one user's.<//>`;
  else {
    const rows = q.data.budgets.map((b) => {
      const limit = dollars(b.monthlyLimitAmount), spent = dollars(b.spentAmount);
      const ratio = limit > 0 ? spent / limit : spent > 0 ? Infinity : 0;
      const status = ratio >= 1 ? 'over' : ratio >= 0.8 ? 'near' : 'ok';
      return { b, limit, spent, ratio, status };
    }).sort((a, b) => b.ratio - a.ratio);
    body = html`<div class="budgets">
      ${rows.map(({ b, ratio, status }) => html`<div class=${'budget ' + status} key=${b.id}>
        <div class="budget-who">${b.user ? b.user.name : html`<strong>The organisation</strong>`}${b.user ? html` <span class="muted">${b.user.department}</span>` : null}</div>
        <div class="budget-bar"><div class="budget-fill" ref=${(el) => { if (el) el.style.width = `${Math.min(ratio, 1) * 100}%`; }}></div></div>
        <div class="budget-figures">${usd(b.spentAmount)} <span class="muted">of</span> ${usd(b.monthlyLimitAmount)} <span class="muted">· ${Number.isFinite(ratio) ? pct(ratio) : '—'}</span></div>
        <span class=${'pill ' + status}>${status === 'over' ? 'over' : status === 'near' ? 'near' : 'within'}</span>
      </div>`)}
    </div>`;
  }
  const month = q.data?.budgets[0]?.month || thisMonth();
  return html`<${Panel} title="Budgets" id="budgets" aside=${html`<span class="muted">spent this month (${monthName(month)}, UTC) against each monthly limit; near is 80% or more</span>`}>${body}<//>`;
}

// ---- turns

const OUTCOMES = ['HITS', 'ABSENCE', 'OUTAGE', 'REFUSED', 'ERROR', 'MAY_HAVE_RUN', 'DECLINED', 'PENDING'];
// How n calls of an outcome read: "1 hit", "2 hits", "1 may have run".
const OUTCOME_WORDS = {
  HITS: ['hit', 'hits'], ABSENCE: ['absence', 'absences'], OUTAGE: ['outage', 'outages'], REFUSED: ['refused', 'refused'],
  ERROR: ['error', 'errors'], MAY_HAVE_RUN: ['may have run', 'may have run'], DECLINED: ['declined', 'declined'], PENDING: ['pending', 'pending'],
};
const outcomeWords = (o, n) => {
  const [one, many] = OUTCOME_WORDS[o] || [o.replaceAll('_', ' ').toLowerCase(), o.replaceAll('_', ' ').toLowerCase()];
  return plural(n, one, many);
};

function Outcomes({ calls }) {
  const counts = Object.fromEntries(OUTCOMES.map((o) => [o, 0]));
  for (const c of calls) counts[c.outcome] = (counts[c.outcome] || 0) + 1;
  const shown = OUTCOMES.filter((o) => counts[o] > 0);
  if (!shown.length) return html`<span class="muted">none</span>`;
  return html`<span class="outcomes">${shown.map((o) => html`<span key=${o} class=${'chip ' + o.toLowerCase()} title=${o}>${outcomeWords(o, counts[o])}</span>`)}</span>`;
}

function Status({ status }) {
  return html`<span class=${'pill status-' + status.toLowerCase()}>${status.replaceAll('_', ' ').toLowerCase()}</span>`;
}

const TURN_STATUSES = ['RUNNING', 'WAITING_FOR_CLARIFICATION', 'WAITING_FOR_APPROVAL', 'COMPLETED', 'FAILED', 'CANCELLED'];

// turnsWhere is the TurnWhereInput of the filters: a person, an agent, a
// status, and a range of UTC days (from its first instant to the end of
// the last).
function turnsWhere(f) {
  const where = {};
  const conversation = {};
  if (f.user) conversation.hasUserWith = [{ id: f.user }];
  if (f.agent) conversation.hasAgentWith = [{ id: f.agent }];
  if (f.user || f.agent) where.hasConversationWith = [conversation];
  if (f.status) where.statusIn = [f.status];
  if (f.from) where.startedAtGTE = f.from + 'T00:00:00Z';
  if (f.to) {
    const end = new Date(f.to + 'T00:00:00Z');
    end.setUTCDate(end.getUTCDate() + 1);
    where.startedAtLT = end.toISOString();
  }
  return where;
}

function TurnsView({ viewer }) {
  const [filters, setFilters] = useState({ user: '', agent: '', status: '', from: '', to: '' });
  const [pages, setPages] = useState([undefined]); // the after cursor of each page shown
  const choices = useQuery('turn_filters', { admin: !!viewer.admin });
  const users = choices.data?.users || [];
  const agents = choices.data?.agents.edges.map((e) => e.node) || [];
  const where = turnsWhere(filters);
  const set = (k) => (e) => { setFilters({ ...filters, [k]: e.target.value }); setPages([undefined]); };
  return html`<div class="view">
    <div class="toolbar"><h1>Turns</h1><button class="ghost" onClick=${() => setPages([...pages])}>Refresh</button></div>
    <div class="filters" id="turn-filters">
      ${viewer.admin ? html`<label>User <select id="filter-user" value=${filters.user} onChange=${set('user')}>
        <option value="">anyone</option>
        ${users.map((u) => html`<option key=${u.id} value=${u.id}>${u.name}${u.department ? ' (' + u.department + ')' : ''}</option>`)}
      </select></label>` : null}
      <label>Agent <select id="filter-agent" value=${filters.agent} onChange=${set('agent')}>
        <option value="">any</option>
        ${agents.map((a) => html`<option key=${a.id} value=${a.id}>${a.name}${a.archivedAt ? ' (archived)' : ''}</option>`)}
      </select></label>
      <label>Status <select id="filter-status" value=${filters.status} onChange=${set('status')}>
        <option value="">any</option>
        ${TURN_STATUSES.map((st) => html`<option key=${st} value=${st}>${st.replaceAll('_', ' ').toLowerCase()}</option>`)}
      </select></label>
      <label>From <input type="date" id="filter-from" value=${filters.from} onChange=${set('from')} /></label>
      <label>To <input type="date" id="filter-to" value=${filters.to} onChange=${set('to')} /></label>
      <span class="muted">days in UTC</span>
    </div>
    <div class="card" id="turns-pages">${pages.map((after, i) => html`<${TurnsPage} key=${i + ':' + JSON.stringify(where) + ':' + pages.length}
      first=${i === 0} after=${after} where=${where} viewer=${viewer} last=${i === pages.length - 1}
      onMore=${(cursor) => setPages([...pages, cursor])} />`)}</div>
    <${Approvals} />
  </div>`;
}

function TurnsPage({ first, after, where, viewer, last, onMore }) {
  const q = useQuery('turns', { after, where });
  if (q.error) return html`<${Failed} error=${q.error} retry=${q.reload} />`;
  if (!q.data) return html`<${Loading} what="turns" />`;
  const turns = q.data.turns.edges.map(({ node }) => node);
  const total = q.data.turns.totalCount;
  if (first && turns.length === 0) return html`<${Empty}>No turns match: start a conversation and send a message, or widen the filters.<//>`;
  return html`${first ? html`<p class="muted" id="turns-count">${plural(total, 'turn')} of ${viewer.admin ? 'the organisation' : 'your conversations'}${Object.keys(where).length ? ' match the filters' : ''}, newest first. Open one for its transcript.</p>` : null}
    <table class="table turns" id=${first ? 'turns' : undefined}>
      ${first ? html`<thead><tr><th>Started</th><th>Conversation</th><th>User</th><th>Agent</th><th>Turn</th><th>Status</th><th>Duration</th><th>Tool calls</th></tr></thead>` : null}
      <tbody>
        ${turns.map((t) => html`<tr key=${t.id} class="turn-row">
          <td class="nowrap">${when(t.startedAt)}</td>
          <td><a href=${'#/conversations/' + encodeURIComponent(t.conversation.id)} class="conversation-link">${t.conversation.title || 'Untitled'}</a>
            <div class="muted ellipsis">${t.userText}</div></td>
          <td>${t.conversation.user.name}</td>
          <td>${t.conversation.agent.name}</td>
          <td class="num">#${t.number}</td>
          <td><${Status} status=${t.status} /></td>
          <td class="num nowrap">${duration(t.startedAt, t.finishedAt)}</td>
          <td><${Outcomes} calls=${t.toolCalls} /></td>
        </tr>`)}
      </tbody>
    </table>
    ${last && q.data.turns.pageInfo.hasNextPage ? html`<p><button class="ghost" id="turns-more" onClick=${() => onMore(q.data.turns.pageInfo.endCursor)}>Show more turns</button></p>` : null}`;
}

// ---- agents

// Confirm asks once more before something is deleted for good.
function Confirm({ id, what, onYes, onNo }) {
  return html`<span class="confirm" id=${id} role="alertdialog" aria-label=${'delete ' + what}>
    Delete ${what}? This cannot be undone.
    <button class="danger confirm-yes" onClick=${onYes}>Delete</button>
    <button class="ghost confirm-no" onClick=${onNo}>Cancel</button>
  </span>`;
}

// useActions runs the console's mutations: the outcome (or the API's
// refusal, in its own words) in one message, and the view reloaded.
function useActions(reload) {
  const [message, setMessage] = useState(null);
  const act = (op, variables, done) => gql(op, variables).then(
    (data) => { setMessage({ text: typeof done === 'function' ? done(data) : done }); reload(); return data; },
    (err) => { refused(err); setMessage({ text: err.message, error: true }); },
  );
  return [message, act, setMessage];
}

function Message({ id, message }) {
  if (!message) return null;
  return html`<div class=${'state ' + (message.error ? 'error' : 'info')} id=${id} role=${message.error ? 'alert' : 'status'}>${message.text}</div>`;
}

const lines = (text) => text.split(/[\n,]/).map((x) => x.trim()).filter(Boolean);

// AgentsView lists the organisation's agents; an admin edits one
// (updateAgent, re-checked against the catalogue ceilings), archives it or
// brings it back, and deletes one no conversation refers to.
function AgentsView({ viewer }) {
  const q = useQuery('agents');
  const [message, act, setMessage] = useActions(q.reload);
  const [editing, setEditing] = useState(null);
  const [confirming, setConfirming] = useState(null);
  let body;
  if (q.error) body = html`<${Failed} error=${q.error} retry=${q.reload} />`;
  else if (!q.data) body = html`<${Loading} what="agents" />`;
  else {
    const agents = q.data.agents.edges.map((e) => e.node);
    body = agents.length === 0 ? html`<${Empty}>No agents yet: <code>createAgent</code> makes one.<//>` : html`<div class="card">
      <table class="table" id="agents"><thead><tr><th>Name</th><th>Tools</th><th>Skills</th><th>Switches</th><th>Status</th><th>Changed</th><th></th></tr></thead>
      <tbody>${agents.map((a) => html`<tr key=${a.id} id=${'agent-' + a.id} class="agent-row">
        <td><strong>${a.name}</strong><div class="muted small ellipsis">${a.instructions || 'no instructions of its own'}</div></td>
        <td>${a.tools.length ? a.tools.map((t) => html`<code key=${t} class="tag">${t}</code> `) : html`<span class="muted">none</span>`}</td>
        <td>${a.skills.length ? a.skills.join(', ') : html`<span class="muted">none</span>`}</td>
        <td class="small">${[a.memory && 'memory', a.budgetCheck && 'budget check', a.pastConversationSearch && 'past conversations'].filter(Boolean).join(', ') || html`<span class="muted">none</span>`}</td>
        <td>${a.archivedAt ? html`<span class="pill status-cancelled">archived ${when(a.archivedAt)}</span>` : 'in use'}</td>
        <td class="nowrap">${when(a.updatedAt)}</td>
        <td class="nowrap">${viewer.admin ? (confirming === a.id
          ? html`<${Confirm} id=${'confirm-agent-' + a.id} what=${'the agent “' + a.name + '”'} onNo=${() => setConfirming(null)}
              onYes=${() => { setConfirming(null); act('delete_agent', { id: a.id }, `The agent “${a.name}” is deleted.`); }} />`
          : html`<button class="ghost edit" onClick=${() => { setMessage(null); setEditing(a); }}>Edit</button>
            ${a.archivedAt
              ? html`<button class="ghost unarchive" onClick=${() => act('archive_agent', { id: a.id, archived: false }, `The agent “${a.name}” is in use again.`)}>Unarchive</button>`
              : html`<button class="ghost archive" onClick=${() => act('archive_agent', { id: a.id, archived: true }, `The agent “${a.name}” is archived: no new conversations start with it.`)}>Archive</button>`}
            <button class="ghost delete" onClick=${() => { setMessage(null); setConfirming(a.id); }}>Delete</button>`) : null}</td>
      </tr>`)}</tbody></table></div>`;
  }
  return html`<div class="view">
    <div class="toolbar"><h1>Agents</h1><button class="ghost" onClick=${q.reload}>Refresh</button></div>
    ${viewer.admin ? null : html`<p class="muted">Agents are changed by admins; you see them as they are.</p>`}
    <${Message} id="agents-message" message=${message} />
    ${editing ? html`<${AgentForm} key=${editing.id} agent=${editing} onCancel=${() => setEditing(null)}
      onSave=${(input) => act('update_agent', { input }, (d) => `The agent “${d.updateAgent.agent.name}” is saved.`).then((d) => { if (d) setEditing(null); })} />` : null}
    ${body}
  </div>`;
}

function AgentForm({ agent: a, onSave, onCancel }) {
  const [f, setF] = useState({
    name: a.name, instructions: a.instructions, tools: a.tools.join('\n'), skills: a.skills.join('\n'),
    memory: a.memory, budgetCheck: a.budgetCheck, pastConversationSearch: a.pastConversationSearch, toolLoading: a.toolLoading,
  });
  const text = (k) => (e) => setF({ ...f, [k]: e.target.value });
  const check = (k) => (e) => setF({ ...f, [k]: e.target.checked });
  const submit = (e) => {
    e.preventDefault();
    onSave({ id: a.id, name: f.name, instructions: f.instructions, tools: lines(f.tools), skills: lines(f.skills),
      memory: f.memory, budgetCheck: f.budgetCheck, pastConversationSearch: f.pastConversationSearch, toolLoading: f.toolLoading });
  };
  return html`<${Panel} title=${'Edit “' + a.name + '”'} id="agent-form">
    <form class="form" onSubmit=${submit}>
      <label>Name <input id="agent-name" value=${f.name} onInput=${text('name')} /></label>
      <label>Instructions <textarea id="agent-instructions" rows="4" onInput=${text('instructions')} value=${f.instructions}></textarea></label>
      <label>Tools <span class="muted small">one a line or comma-separated; checked against the catalogue ceilings</span>
        <textarea id="agent-tools" rows="4" onInput=${text('tools')} value=${f.tools}></textarea></label>
      <label>Skills <span class="muted small">one a line or comma-separated</span><textarea id="agent-skills" rows="2" onInput=${text('skills')} value=${f.skills}></textarea></label>
      <div class="checks">
        <label><input type="checkbox" id="agent-memory" checked=${f.memory} onChange=${check('memory')} /> memory</label>
        <label><input type="checkbox" id="agent-budget" checked=${f.budgetCheck} onChange=${check('budgetCheck')} /> budget check</label>
        <label><input type="checkbox" id="agent-past" checked=${f.pastConversationSearch} onChange=${check('pastConversationSearch')} /> past-conversation search</label>
        <label>Tool loading <select id="agent-loading" value=${f.toolLoading} onChange=${text('toolLoading')}>
          ${['AUTO', 'FULL', 'DEFERRED'].map((v) => html`<option key=${v} value=${v}>${v.toLowerCase()}</option>`)}
        </select></label>
      </div>
      <div class="form-actions"><button type="submit" class="primary" id="agent-save">Save</button>
        <button type="button" class="ghost" id="agent-cancel" onClick=${onCancel}>Cancel</button></div>
    </form>
  <//>`;
}

// ---- knowledge and skills

// KnowledgeView lists the knowledge bases with their documents and the
// published skills; an admin deletes them (a knowledge base or skill an
// agent binds is refused, naming the agents).
function KnowledgeView({ viewer }) {
  const q = useQuery('knowledge');
  const [message, act, setMessage] = useActions(q.reload);
  const [confirming, setConfirming] = useState(null);
  const ask = (key) => () => { setMessage(null); setConfirming(key); };
  const deleter = (key, what, op, id, done) => confirming === key
    ? html`<${Confirm} id=${'confirm-' + key} what=${what} onNo=${() => setConfirming(null)}
        onYes=${() => { setConfirming(null); act(op, { id }, done); }} />`
    : html`<button class="ghost delete" onClick=${ask(key)}>Delete</button>`;
  let body;
  if (q.error) body = html`<${Failed} error=${q.error} retry=${q.reload} />`;
  else if (!q.data) body = html`<${Loading} what="knowledge bases and skills" />`;
  else {
    const kbs = q.data.knowledgeBases.edges.map((e) => e.node);
    const skills = q.data.skills;
    body = html`
      <${Panel} title="Knowledge bases" id="knowledge-bases" aside=${html`<span class="muted">what knowledge_search and read_document reach, for the agents bound to each</span>`}>
        ${kbs.length === 0 ? html`<p class="muted">No knowledge bases: <code>createKnowledgeBase</code> makes one.</p>` : kbs.map((kb) => html`<div class="kb" key=${kb.id} id=${'kb-' + kb.id}>
          <div class="family-head"><strong>${kb.name}</strong> <span class="muted">${plural(kb.documents.totalCount, 'document')}</span>
            ${viewer.admin ? deleter('kb-' + kb.id, 'the knowledge base “' + kb.name + '” and its documents', 'delete_knowledge_base', kb.id,
              (d) => `The knowledge base “${kb.name}” is deleted, with ${plural(d.deleteKnowledgeBase.documents, 'document')}.`) : null}</div>
          ${kb.documents.edges.length ? html`<table class="table documents"><tbody>${kb.documents.edges.map(({ node: doc }) => html`<tr key=${doc.id} id=${'doc-' + doc.id}>
            <td>${doc.title}</td><td class="muted">${doc.filename || doc.mimeType}</td><td class="num">${int(doc.chars)} chars</td>
            <td><span class=${'pill status-' + (doc.status === 'READY' ? 'completed' : doc.status === 'FAILED' ? 'failed' : 'running')}>${doc.status.toLowerCase()}</span>${doc.error ? html` <span class="muted small">${doc.error}</span>` : null}</td>
            <td class="nowrap">${viewer.admin ? deleter('doc-' + doc.id, 'the document “' + doc.title + '”', 'delete_document', doc.id, `The document “${doc.title}” is deleted.`) : null}</td>
          </tr>`)}</tbody></table>` : null}
        </div>`)}
      <//>
      <${Panel} title="Skills" id="skills" aside=${html`<span class="muted">published with publishSkill; agents list the ones they may load</span>`}>
        ${skills.length === 0 ? html`<p class="muted">No skills published.</p>` : html`<table class="table" id="skill-list"><tbody>${skills.map((sk) => html`<tr key=${sk.id} id=${'skill-' + sk.id}>
          <td><code>${sk.name}</code></td><td>${sk.description}</td><td class="nowrap">${when(sk.updatedAt)}</td>
          <td class="nowrap">${viewer.admin ? deleter('skill-' + sk.id, 'the skill “' + sk.name + '”', 'delete_skill', sk.id, `The skill “${sk.name}” is deleted.`) : null}</td>
        </tr>`)}</tbody></table>`}
      <//>`;
  }
  return html`<div class="view">
    <div class="toolbar"><h1>Knowledge & skills</h1><button class="ghost" onClick=${q.reload}>Refresh</button></div>
    <${Message} id="knowledge-message" message=${message} />
    ${body}
  </div>`;
}

// ---- people and tokens

// AccessView lists the organisation's people (admins: change a role,
// deactivate, reactivate) and the API tokens the token may see (revoke).
function AccessView({ viewer }) {
  const q = useQuery('access', { admin: !!viewer.admin });
  const [message, setMessage] = useState('');
  const act = (op, variables, done) => gql(op, variables).then(
    () => { setMessage(done); q.reload(); },
    (err) => { refused(err); setMessage(err.message); },
  );
  let body;
  if (q.error) body = html`<${Failed} error=${q.error} retry=${q.reload} />`;
  else if (!q.data) body = html`<${Loading} what="people and tokens" />`;
  else {
    const users = q.data.users || [];
    const tokens = q.data.apiTokens;
    body = html`
      ${viewer.admin ? html`<${Panel} title="People" id="people">
        <table class="table" id="users"><thead><tr><th>Name</th><th>Department</th><th>Role</th><th>Status</th><th></th></tr></thead>
        <tbody>${users.map((u) => html`<tr key=${u.id} id=${'user-' + u.id}>
          <td>${u.name}</td><td>${u.department}</td><td>${u.admin ? 'admin' : 'member'}</td>
          <td>${u.deactivatedAt ? html`<span class="pill status-cancelled">deactivated ${when(u.deactivatedAt)}</span>` : 'active'}</td>
          <td class="nowrap">${u.id === viewer.id ? html`<span class="muted">you</span>` : html`
            <button class="ghost role" onClick=${() => act('set_role', { id: u.id, admin: !u.admin }, `${u.name} is now ${u.admin ? 'a member' : 'an admin'}.`)}>${u.admin ? 'Make member' : 'Make admin'}</button>
            ${u.deactivatedAt
              ? html`<button class="ghost reactivate" onClick=${() => act('reactivate_user', { id: u.id }, `${u.name} is active again.`)}>Reactivate</button>`
              : html`<button class="ghost deactivate" onClick=${() => act('deactivate_user', { id: u.id }, `${u.name} is deactivated: their tokens stopped working.`)}>Deactivate</button>`}`}</td>
        </tr>`)}</tbody></table>
      <//>` : null}
      <${Panel} title="API tokens" id="tokens" aside=${html`<span class="muted">${viewer.admin ? 'the organisation’s' : 'yours'}; secrets are shown once, when made</span>`}>
        ${tokens.length === 0 ? html`<p class="muted">No tokens.</p>` : html`<table class="table" id="token-list"><thead><tr><th>Name</th><th>Person</th><th>Hint</th><th>Made</th><th>Last used</th><th>Expires</th><th></th></tr></thead>
        <tbody>${tokens.map((k) => html`<tr key=${k.id} id=${'token-' + k.id}>
          <td>${k.name}</td><td>${k.user.name}</td><td><code>${k.hint}</code></td><td class="nowrap">${when(k.createdAt)}</td>
          <td class="nowrap">${k.lastUsedAt ? when(k.lastUsedAt) : html`<span class="muted">never</span>`}</td>
          <td class="nowrap">${k.expiresAt ? when(k.expiresAt) : html`<span class="muted">never</span>`}</td>
          <td>${k.revokedAt ? html`<span class="muted">revoked</span>` : html`<button class="ghost revoke" onClick=${() => act('revoke_token', { id: k.id }, `The token “${k.name}” is revoked.`)}>Revoke</button>`}</td>
        </tr>`)}</tbody></table>`}
      <//>`;
  }
  return html`<div class="view">
    <div class="toolbar"><h1>People & tokens</h1><button class="ghost" onClick=${q.reload}>Refresh</button></div>
    ${message ? html`<p class="muted" id="access-message">${message}</p>` : null}
    ${body}
  </div>`;
}

// Approvals lists the calls that waited for a person's decision: those
// still waiting first, then who decided what, and when.
function Approvals() {
  const q = useQuery('approvals', {});
  let body, policies = null;
  if (q.data) {
    const apps = q.data.catalogue.tools.filter((t) => t.family === 'application');
    policies = apps.length === 0 ? null : html`<p class="muted" id="approval-policies">Policies:
      ${apps.map((t, i) => html`${i ? ', ' : ''}<code>${t.name}</code> ${t.approval.toLowerCase()}${t.asksApproval ? ' (asks)' : ''}`)}</p>`;
  }
  if (q.error) body = html`<${Failed} error=${q.error} retry=${q.reload} />`;
  else if (!q.data) body = html`<${Loading} what="approvals" />`;
  else if (q.data.approvals.length === 0) body = html`<${Empty}>No tool call has waited for a decision. An admin sets <code>defaultApproval</code> or <code>approvals</code> on an application.<//>`;
  else {
    const rows = [...q.data.approvals].sort((a, b) => (a.decision ? 1 : 0) - (b.decision ? 1 : 0));
    body = html`<table class="table" id="approvals">
      <thead><tr><th>Asked</th><th>Conversation</th><th>Tool</th><th>Arguments</th><th>Decision</th><th>By</th><th>When</th></tr></thead>
      <tbody>
        ${rows.map((a) => { const t = a.toolCall.turn; return html`<tr key=${a.id}>
          <td class="nowrap">${when(a.createdAt)}</td>
          <td><a href=${'#/conversations/' + encodeURIComponent(t.conversation.id)} class="conversation-link">${t.conversation.title || 'Untitled'}</a>
            <div class="muted">${t.conversation.user.name} · turn #${t.number}</div></td>
          <td><code>${a.tool}</code> <span class="muted">${a.policy.toLowerCase()}</span></td>
          <td><code class="ellipsis">${a.decidedArguments || a.arguments}</code></td>
          <td>${a.decision ? html`<span class=${'pill decision-' + a.decision.toLowerCase()}>${a.decision.toLowerCase()}</span>${a.reason ? html` <span class="muted">${a.reason}</span>` : null}`
            : html`<span class="pill status-waiting_for_approval">waiting</span> <span class="muted">until ${when(a.expiresAt)}</span>`}</td>
          <td>${a.decidedBy ? a.decidedBy.name : a.timedOut ? html`<span class="muted">no answer</span>` : ''}</td>
          <td class="nowrap">${a.decidedAt ? when(a.decidedAt) : ''}</td>
        </tr>`; })}
      </tbody>
    </table>`;
  }
  return html`<${Panel} title="Approvals" id="approvals-panel" aside=${html`<span class="muted">calls that waited for a person's decision</span>`}>${policies}${body}<//>`;
}

// ---- transcript

function TranscriptView({ id }) {
  const q = useQuery('transcript', { id });
  const rated = useQuery('turn_ratings', { id });
  const [reading, setReading] = useState(null);
  const ratings = useMemo(() => Object.fromEntries((rated.data?.conversation.turns.edges || []).map((e) => [e.node.id, e.node.ratings])), [rated.data]);
  if (q.error) return html`<div class="view"><${Back} /><${Failed} error=${q.error} retry=${q.reload} /></div>`;
  if (!q.data) return html`<div class="view"><${Back} /><${Loading} what="the transcript" /></div>`;
  const c = q.data.conversation;
  const turns = c.turns.edges.map((e) => e.node);
  return html`<div class="view" id="transcript">
    <${Back} />
    <div class="toolbar"><h1>${c.title || 'Untitled conversation'}</h1></div>
    <p class="muted">${c.user.name} (${c.user.department}) with ${c.agent.name} · ${plural(c.turnsCount, 'turn')} · started ${when(c.createdAt)}</p>
    ${turns.length === 0 ? html`<${Empty}>No turns in this conversation yet.<//>` : turns.map((t) => html`<${Turn} key=${t.id} turn=${t} ratings=${ratings[t.id]} onRead=${setReading} onEnd=${() => { q.reload(); rated.reload(); }} />`)}
    ${c.turns.pageInfo.hasNextPage ? html`<p class="muted">Later turns are not shown: this view shows the first ${turns.length}.</p>` : null}
    ${reading ? html`<${ResultWindow} conversationId=${c.id} result=${reading} onClose=${() => setReading(null)} />` : null}
  </div>`;
}

function Back() {
  return html`<a class="back" href="#/turns">‹ Turns</a>`;
}

// LiveText shows a running turn's text as the model writes it, and reloads
// the transcript once the turn stops running.
function LiveText({ id, onEnd }) {
  const [steps, setSteps] = useState({});
  useEffect(() => followTurn(id, setSteps, onEnd), [id]);
  const last = Object.keys(steps).map(Number).sort((a, b) => a - b).pop();
  if (last === undefined || !steps[last]) return html`<div class="muted small live">Waiting for the model…</div>`;
  return html`<div class="bubble answer live"><div class="who">Writing (step ${last + 1})</div>${steps[last]}</div>`;
}

// TurnRatings shows who rated a turn's answer, up or down, and why.
function TurnRatings({ ratings }) {
  if (!ratings || ratings.length === 0) return null;
  const up = ratings.filter((r) => r.rating === 'UP').length;
  return html`<div class="turn-ratings">
    <div class="muted small ratings-count">Rated ${int(up)} up · ${int(ratings.length - up)} down</div>
    ${ratings.map((r, i) => html`<div class="comment" key=${(r.user?.id || 'gone') + i}>
      <span class=${'chip ' + (r.rating === 'UP' ? 'hits' : 'error')}>${r.rating === 'UP' ? 'up' : 'down'}</span>
      <strong> ${r.user?.name || 'a deleted user'}</strong> <span class="muted small">${when(r.updatedAt)}</span>
      ${r.comment ? html`<div>${r.comment}</div>` : null}
    </div>`)}
  </div>`;
}

function Turn({ turn: t, ratings, onRead, onEnd }) {
  const cost = t.modelCalls.reduce((s, m) => s + Number(m.costAmount.amount), 0);
  const tokens = t.modelCalls.reduce((s, m) => s + m.inputTokens + m.cacheReadTokens + m.cacheWriteTokens + m.outputTokens, 0);
  return html`<article class="card turn" id=${'turn-' + t.number}>
    <header class="turn-head">
      <strong>Turn ${t.number}</strong> <${Status} status=${t.status} />${t.superseded ? html` <span class="pill superseded" title="regenerateTurn answered this message again in a later turn">superseded</span>` : null}
      <span class="muted">${when(t.startedAt)} (${t.timeZone}) · ${duration(t.startedAt, t.finishedAt)} · ${plural(t.modelCalls.length, 'model call')} · ${short(tokens)} tokens · ${usd(cost)}${t.replayed ? ' · replayed' : ''}</span>
    </header>
    <div class="bubble user"><div class="who">User</div>${t.userText}</div>
    ${t.toolCalls.length ? html`<table class="table calls">
      <thead><tr><th>#</th><th>Tool</th><th>Outcome</th><th>Attempts</th><th>Stored result</th><th></th></tr></thead>
      <tbody>${t.toolCalls.map((c) => html`<${Call} key=${c.id} call=${c} onRead=${onRead} />`)}</tbody>
    </table>` : null}
    ${t.answer ? html`<div class="bubble answer"><div class="who">Answer</div>${t.answer}</div>` : null}
    <${TurnRatings} ratings=${ratings} />
    ${t.status === 'RUNNING' ? html`<${LiveText} id=${t.id} onEnd=${onEnd} />` : null}
    ${t.error ? html`<div class="state error">${t.error}</div>` : null}
  </article>`;
}

function Call({ call: c, onRead }) {
  const r = c.result;
  return html`<tr class="call">
    <td class="num">${c.position + 1}</td>
    <td><code>${c.name}</code>
      <details><summary class="muted">arguments</summary><pre>${pretty(c.arguments)}</pre></details>
      ${c.message ? html`<div class="muted small">${c.message}</div>` : null}
      ${c.failures.length ? html`<ul class="failures">${c.failures.map((f) => html`<li key=${f.item}><span class=${'chip ' + f.kind.toLowerCase()}>${f.kind.toLowerCase()}</span> item ${f.item}${f.input ? html` <code>${f.input}</code>` : null}: ${f.message}</li>`)}</ul>` : null}
      ${c.guardrail ? html`<div class="state warn small">Flagged: ${c.guardrail}</div>` : null}
    </td>
    <td><span class=${'chip ' + c.outcome.toLowerCase()}>${c.outcome.replaceAll('_', ' ').toLowerCase()}</span></td>
    <td class="num">${c.attempts}</td>
    <td>${r ? html`<div class="result-meta"><code class="ref">${r.ref}</code><div class="muted small">${r.kind.toLowerCase()} · ${int(r.chars)} chars · ${int(r.bytes)} bytes · ${plural(r.items, 'item')}${r.truncatedAtSource ? ' · truncated at source' : ''}</div></div>` : html`<span class="muted">none</span>`}</td>
    <td>${r ? html`<button class="ghost read" onClick=${() => onRead(r)}>Read</button>` : null}</td>
  </tr>`;
}

function pretty(json) {
  try { return JSON.stringify(JSON.parse(json), null, 2); } catch { return json; }
}

const WINDOW = 4000;

function ResultWindow({ conversationId, result, onClose }) {
  const [offset, setOffset] = useState(0);
  const q = useQuery('read_result', { conversationId, ref: result.ref, offset, maxChars: WINDOW });
  const read = q.data?.toolResults.reads[0];
  const failure = q.data?.toolResults.failures[0];
  useEffect(() => {
    const esc = (e) => e.key === 'Escape' && onClose();
    addEventListener('keydown', esc);
    return () => removeEventListener('keydown', esc);
  }, []);
  return html`<div class="overlay" onClick=${(e) => e.target === e.currentTarget && onClose()}>
    <div class="card window" role="dialog" aria-label=${'stored result ' + result.ref} id="result-window">
      <header class="panel-head">
        <h2>Stored result <code>${result.ref}</code></h2>
        <button class="ghost" onClick=${onClose} aria-label="Close">✕</button>
      </header>
      ${q.error ? html`<${Failed} error=${q.error} retry=${q.reload} />` : !q.data ? html`<${Loading} what="the window" />` :
        failure ? html`<div class="state error">${failure.message}</div>` :
        read?.error ? html`<div class="state error">${read.error}</div>` :
        read?.absent || read?.text == null ? html`<${Empty}>Nothing readable: a ${(read?.kind || 'media').toLowerCase()} result of ${int(read?.bytes)} bytes.<//>` : html`
        <div class="muted small" id="window-range">characters ${int(read.offset)}–${int(read.offset + [...read.text].length)} of ${int(read.totalChars)}${read.truncatedAtSource ? ' · truncated at source' : ''}</div>
        <pre class="window-text">${read.text}</pre>
        <div class="window-nav">
          <button class="ghost" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - WINDOW))}>‹ Previous</button>
          <button class="ghost" id="window-next" disabled=${read.nextOffset == null} onClick=${() => setOffset(read.nextOffset)}>Next ›</button>
        </div>`}
    </div>
  </div>`;
}

// ---- the shell

const VIEWS = [
  { key: 'catalogue', label: 'Catalogue' },
  { key: 'cost', label: 'Cost' },
  { key: 'turns', label: 'Turns' },
  { key: 'agents', label: 'Agents' },
  { key: 'knowledge', label: 'Knowledge & skills' },
  { key: 'access', label: 'People & tokens' },
];

function Shell({ viewer, onSignOut }) {
  const route = useRoute();
  const active = route.view === 'conversations' ? 'turns' : route.view;
  let view;
  switch (route.view) {
    case 'cost': view = html`<${CostView} month=${route.arg} viewer=${viewer} />`; break;
    case 'turns': view = html`<${TurnsView} viewer=${viewer} />`; break;
    case 'agents': view = html`<${AgentsView} viewer=${viewer} />`; break;
    case 'knowledge': view = html`<${KnowledgeView} viewer=${viewer} />`; break;
    case 'access': view = html`<${AccessView} viewer=${viewer} />`; break;
    case 'conversations': view = html`<${TranscriptView} id=${route.arg} />`; break;
    default: view = html`<${CatalogueView} />`;
  }
  return html`<div class="shell">
    <header class="top">
      <div class="brand"><span class="logo"></span>toolgate <span class="brand-sub">admin</span></div>
      <nav>${VIEWS.map((v) => html`<a key=${v.key} href=${'#/' + v.key} id=${'nav-' + v.key} class=${active === v.key ? 'on' : ''}>${v.label}</a>`)}</nav>
      <div class="who" id="viewer">
        <span>${viewer.name}</span> <span class="muted">${viewer.organizationName}</span>
        <span class=${'pill ' + (viewer.admin ? 'admin' : '')}>${viewer.admin ? 'admin' : 'member'}</span>
        <button class="ghost" id="signout" onClick=${() => onSignOut()}>Sign out</button>
      </div>
    </header>
    <main class="main">${view}</main>
  </div>`;
}

function App() {
  const [token, setToken] = useState(session.token);
  const [message, setMessage] = useState(null);
  const [viewer, setViewer] = useState(null);
  const [error, setError] = useState(null);
  const [attempt, setAttempt] = useState(0);
  const signOut = useCallback((why) => {
    session.clear();
    setToken(null);
    setViewer(null);
    setMessage(why || null);
  }, []);
  signOutHandler = signOut;
  useEffect(() => {
    // A #token= link followed while the page is open signs in too.
    const on = () => { if (takeTokenFromAddress()) { setMessage(null); setViewer(null); setToken(session.token); setAttempt((n) => n + 1); } };
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  useEffect(() => {
    if (!token) return;
    setError(null);
    gql('viewer').then((d) => setViewer(d.viewer), (err) => { refused(err); setError(err); });
  }, [token, attempt]);
  if (!token) return html`<${SignIn} message=${message} onToken=${(t) => { session.set(t); setMessage(null); setToken(t); }} />`;
  if (error && !(error instanceof Unauthenticated)) return html`<main class="signin"><${Failed} error=${error} retry=${() => setAttempt((n) => n + 1)} /></main>`;
  if (!viewer) return html`<main class="signin"><${Loading} what="your account" /></main>`;
  return html`<${Shell} viewer=${viewer} onSignOut=${() => signOut(SIGNED_OUT)} />`;
}

render(html`<${App} />`, document.getElementById('app'));
