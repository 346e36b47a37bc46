// The console's one way to the server: the public GraphQL API, with the
// API token the user signed in with. The documents are the files of ops/,
// the same the server's tests run.

const { endpoint, ops } = document.body.dataset;
const KEY = 'toolgate.admin.token';

/** The token lives in this tab's session storage only. */
export const session = {
  get token() { return sessionStorage.getItem(KEY); },
  set(token) { sessionStorage.setItem(KEY, token); },
  clear() { sessionStorage.removeItem(KEY); },
};

/**
 * `/admin#token=TOKEN` signs in with TOKEN and takes it out of the address
 * bar (and of the history) at once.
 */
export function takeTokenFromAddress() {
  const m = location.hash.match(/^#token=([^&]+)/);
  if (!m) return false;
  session.set(decodeURIComponent(m[1]));
  history.replaceState(null, '', location.pathname + location.search);
  return true;
}

/** The API refused the token: missing, malformed, expired or revoked. */
export class Unauthenticated extends Error {
  constructor() { super('The token was refused: it is missing, expired or revoked.'); }
}

/** The API answered with errors. */
export class ApiError extends Error {
  constructor(errors) {
    super(errors.map((e) => e.message).join('; '));
    this.codes = errors.map((e) => e.extensions?.code).filter(Boolean);
  }
}

const documents = new Map();

function load(name) {
  if (!documents.has(name)) {
    documents.set(name, fetch(ops + name + '.graphql').then((res) => {
      if (!res.ok) throw new Error(`operation ${name}: HTTP ${res.status}`);
      return res.text();
    }).then((query) => ({ query, operationName: query.match(/^\s*(?:query|mutation)\s+(\w+)/m)[1] })).catch((err) => {
      documents.delete(name);
      throw err;
    }));
  }
  return documents.get(name);
}

/** Runs the operation of ops/NAME.graphql with variables. */
export async function gql(name, variables = {}) {
  const token = session.token;
  if (!token) throw new Unauthenticated();
  const { query, operationName } = await load(name);
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/graphql-response+json, application/json',
      Authorization: 'Bearer ' + token,
    },
    body: JSON.stringify({ query, operationName, variables }),
  });
  if (res.status === 401) throw new Unauthenticated();
  let out;
  try {
    out = await res.json();
  } catch {
    throw new Error(`the server answered HTTP ${res.status} without GraphQL`);
  }
  if (out.errors?.length) {
    if (out.errors.some((e) => e.extensions?.code === 'UNAUTHENTICATED')) throw new Unauthenticated();
    throw new ApiError(out.errors);
  }
  return out.data;
}

// followQuery is the one subscription the console makes: a running turn's
// events with its text as the model writes it.
const followQuery = `subscription Follow($t: ID!, $after: String) {
  turnEvents(turnId: $t, after: $after, replay: true, deltas: true) { kind seq step turn { status } delta { text offset } }
}`;

/**
 * Follows a running turn over Server-Sent Events (graphql-sse): onText gets
 * each step's text so far as the model writes it, onEnd the turn's status
 * once it stops running. A dropped connection resumes after the last seq
 * read, so no character is lost or repeated. Returns a function that stops.
 */
export function followTurn(turnId, onText, onEnd) {
  const ctrl = new AbortController();
  const steps = {};
  let last = null;
  // place puts a piece at its offset (in characters), dropping what lies past it.
  const place = (step, offset, text) => {
    const chars = Array.from(steps[step] ?? '');
    chars.length = Math.min(offset, chars.length);
    steps[step] = chars.join('') + text;
  };
  (async () => {
    for (let tries = 0; tries < 5 && !ctrl.signal.aborted; tries++) {
      try {
        const res = await fetch(endpoint, {
          method: 'POST',
          signal: ctrl.signal,
          headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', Authorization: 'Bearer ' + session.token },
          body: JSON.stringify({ query: followQuery, operationName: 'Follow', variables: { t: turnId, after: last } }),
        });
        if (!res.ok) return;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            if (/^event: ?complete/m.test(block)) { onEnd(); return; }
            const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join('\n');
            if (!data) continue;
            const e = JSON.parse(data).data?.turnEvents;
            if (!e) continue;
            last = e.seq;
            if (e.kind === 'TEXT_DELTA') {
              place(e.step, e.delta.offset, e.delta.text);
              onText({ ...steps });
            }
          }
        }
      } catch {
        if (ctrl.signal.aborted) return;
      }
    }
  })();
  return () => ctrl.abort();
}

/**
 * Downloads a month's usage as CSV (per user, agent and model) from the
 * server's export path, with the token, and saves it as a file; answers
 * the file's name and how many rows it holds.
 */
export async function downloadUsage(month) {
  const token = session.token;
  if (!token) throw new Unauthenticated();
  const url = new URL('usage.csv', new URL(endpoint, location.href));
  url.searchParams.set('month', month);
  const res = await fetch(url, { headers: { Authorization: 'Bearer ' + token } });
  if (res.status === 401) throw new Unauthenticated();
  if (!res.ok) throw new Error(`the export answered HTTP ${res.status}`);
  const text = await res.text();
  const name = `toolgate-usage-${month}.csv`;
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  return { name, rows: Math.max(text.trim().split('\n').length - 1, 0) };
}
