// Follows one turn's events to its end with a real GraphQL client, over
// graphql-transport-ws (graphql-ws) or Server-Sent Events (graphql-sse),
// puts each step's streamed text together as a portal would, and prints
// what it read as JSON. With reconnectEvery > 0 it drops the subscription
// after every that many events and resumes with after: the last seq, on
// the next of its urls.
import { createClient as createWS } from 'graphql-ws';
import { createClient as createSSE } from 'graphql-sse';
import WebSocket from 'ws';

const opts = JSON.parse(process.argv[2]);
const query = `subscription($t: ID!, $after: String, $replay: Boolean) {
  turnEvents(turnId: $t, after: $after, replay: $replay, deltas: true) {
    kind seq step turn { status answer }
    delta { text offset } writing { index name argumentsChars }
  }
}`;

const steps = {}; // step -> array of characters
const out = { steps: {}, kinds: [], seqs: [], resets: 0, writings: [], errors: [], subscriptions: 0, status: '' };
let last = null;

// place puts a piece of text at its offset, dropping what lies past it.
function place(step, offset, text) {
  const chars = steps[step] ?? [];
  if (offset > chars.length) {
    out.errors.push(`gap in step ${step}: piece at ${offset}, held ${chars.length}`);
    return;
  }
  if (offset < chars.length) out.resets++;
  chars.length = offset;
  chars.push(...Array.from(text));
  steps[step] = chars;
}

function client(url) {
  if (opts.transport === 'sse') {
    return createSSE({ url, headers: { Authorization: `Bearer ${opts.token}` }, retryAttempts: 0 });
  }
  return createWS({
    url: url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, retryAttempts: 0, lazy: true,
    connectionParams: { Authorization: `Bearer ${opts.token}` },
  });
}

let ended = false;
for (let round = 0; !ended && round < 1000; round++) {
  const c = client(opts.urls[round % opts.urls.length]);
  out.subscriptions++;
  const it = c.iterate({ query, variables: { t: opts.turnId, after: last, replay: last === null } });
  let n = 0;
  let dropped = false;
  try {
    for await (const res of it) {
      if (res.errors) {
        out.errors.push(JSON.stringify(res.errors));
        ended = true;
        break;
      }
      const e = res.data.turnEvents;
      if (last !== null && !(e.seq > last)) out.errors.push(`seq ${e.seq} not after ${last}`);
      last = e.seq;
      out.kinds.push(e.kind);
      out.seqs.push(e.seq);
      if (e.kind === 'TEXT_DELTA') place(e.step, e.delta.offset, e.delta.text);
      if (e.kind === 'TOOL_CALL_WRITING') out.writings.push(`${e.step}:${e.writing.index}:${e.writing.name}`);
      if (e.kind === 'STATUS' && ['COMPLETED', 'FAILED', 'CANCELLED'].includes(e.turn.status)) {
        out.status = e.turn.status;
        ended = true;
      }
      if (opts.reconnectEvery > 0 && ++n % opts.reconnectEvery === 0 && !ended) {
        dropped = true;
        break;
      }
    }
  } catch (err) {
    out.errors.push(String(err?.message ?? err));
    ended = true;
  }
  if (!dropped) ended = true;
  await it.return?.();
  c.dispose();
}
for (const [step, chars] of Object.entries(steps)) out.steps[step] = chars.join('');
process.stdout.write(JSON.stringify(out));
process.exit(0);
