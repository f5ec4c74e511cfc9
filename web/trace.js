// The playground's trace files: reading a small log (JSON lines as for `floodgate replay`, with a
// request's duration for the concurrency lane when a line has one; or nginx/Apache "combined"
// lines), and the pictures of the seeds drawn for one key of it: the fixed windows as bands, the
// moving window's span at each blocked request, the sliding window counter's previous window
// weighing less as the current one advances. (The decisions themselves come from the service, as
// for every other request of the playground.)
'use strict';

const TRACE_MONTHS = { jan: 0, feb: 1, mar: 2, apr: 3, may: 4, jun: 5, jul: 6, aug: 7, sep: 8, oct: 9, nov: 10, dec: 11 };
const COMBINED = /^(\S+) \S+ \S+ \[(\d{2})\/(\w{3})\/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})\]/;

function traceTime(v) {
  if (typeof v === 'number') return v > 1e14 ? v / 1e6 : v > 1e11 ? v / 1e3 : v;
  if (typeof v === 'string' && v.trim() !== '') {
    const n = Number(v);
    if (Number.isFinite(n)) return traceTime(n);
    const ms = Date.parse(v);
    if (Number.isFinite(ms)) return ms / 1000;
  }
  return NaN;
}

// [field, milliseconds per unit], in the order `floodgate simulate --duration-field auto` tries them.
const DURATION_FIELDS = [['request_time', 1000], ['upstream_response_time', 1000], ['duration', 1],
  ['duration_ms', 1], ['response_time', 1000], ['latency_ms', 1]];

function traceLine(line) {
  if (line.startsWith('{')) {
    const o = JSON.parse(line);
    const t = traceTime(o.t ?? o.time ?? o.timestamp ?? o['@timestamp'] ?? o.start_time ?? o.msec);
    const key = o.key ?? o.remote_addr ?? o.client_ip ?? o.ip ?? o.downstream_remote_address;
    const cost = o.cost ?? 1;
    if (!Number.isFinite(t)) throw new Error('no time');
    if (key === undefined || key === '') throw new Error('no key');
    if (!Number.isInteger(cost) || cost < 0) throw new Error('bad cost');
    // The request's duration for the concurrency lane, when the line has one: the first of the
    // fields `floodgate simulate` reads, in its units (seconds, or ms for duration and *_ms).
    const field = DURATION_FIELDS.find(([name]) => o[name] !== undefined && o[name] !== null && o[name] !== '-');
    if (!field) return { t, key: String(key), cost };
    const d = Number(o[field[0]]) * field[1];
    if (!Number.isFinite(d) || d < 0) throw new Error(`bad ${field[0]}`);
    return { t, key: String(key), cost, duration_ms: Math.round(d) };
  }
  const m = COMBINED.exec(line);
  if (!m) throw new Error('neither JSON nor a combined log line');
  const month = TRACE_MONTHS[m[3].toLowerCase()];
  if (month === undefined) throw new Error('bad month');
  const offset = (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 3600 + Number(m[10]) * 60);
  const t = Date.UTC(Number(m[4]), month, Number(m[2]), Number(m[5]), Number(m[6]), Number(m[7])) / 1000 - offset;
  return { t, key: m[1], cost: 1 };
}

// {events (t in seconds since the first), origin (the first's time since the epoch), bad, examples,
// focus (the key with the most requests)} or {error}.
function parseTraceText(text, max) {
  const events = [];
  const examples = [];
  let bad = 0, latest = -Infinity, number = 0;
  for (const raw of text.split('\n')) {
    number++;
    const line = raw.trim();
    if (!line) continue;
    try {
      const e = traceLine(line);
      e.t = Math.max(e.t, latest);  // logged out of order: taken at the latest time, as the CLI does
      latest = e.t;
      events.push(e);
    } catch (err) {
      bad++;
      if (examples.length < 3) examples.push(`line ${number}: ${err.message}`);
    }
    if (events.length > max) return { error: `more than ${max} requests: use floodgate simulate for bigger logs` };
  }
  if (!events.length) return { error: `no request could be read (${examples.join('; ') || 'empty file'})` };
  const origin = events[0].t;
  const counts = new Map();
  for (const e of events) {
    e.t = Math.round((e.t - origin) * 1e6) / 1e6;
    counts.set(e.key, (counts.get(e.key) || 0) + 1);
  }
  let focus = events[0].key;
  for (const [k, n] of counts) if (n > counts.get(focus)) focus = k;
  return { events, origin, bad, examples, focus, keys: counts.size };
}

// The period of the first limit of "5 per 10 seconds", "10/minute; 100/hour", in seconds.
function firstPeriod(limit) {
  const m = /^\s*\d+\s*(?:\/|per)\s*(\d*(?:\.\d+)?)\s*([a-z]+)/i.exec(limit || '');
  if (!m) return 0;
  const unit = m[2].toLowerCase().replace(/s$/, '');
  const secs = { second: 1, sec: 1, s: 1, minute: 60, min: 60, m: 60, hour: 3600, h: 3600, day: 86400, d: 86400 }[unit];
  return secs ? secs * (m[1] ? Number(m[1]) : 1) : 0;
}

// Window starts of the focus key: clock-aligned (multiples of the period since the epoch), or
// anchored at a first hit (a window opens at the first request after the previous one closed).
function windowStarts(lane, focusTimes, origin, period, end) {
  const starts = [];
  if (lane === 'fixed-window-first-hit') {
    let open = -Infinity;
    for (const t of focusTimes) if (t >= open + period) { open = t; starts.push(t); }
    return starts;
  }
  for (let s = Math.floor(origin / period) * period - origin; s < end; s += period) starts.push(s);
  return starts;
}

// The seeds' picture of `lane` for the focus key, as an SVG path (drawn behind the marks):
// geom = {x(t), top, bottom, end (seconds)}; events/decisions of the whole trace.
function seedsPicture(lane, events, decisions, focus, origin, period, geom) {
  if (!period || !decisions.length) return '';
  const mine = [];
  for (let i = 0; i < decisions.length && i < events.length; i++) if (events[i].key === focus) mine.push(i);
  const times = mine.map((i) => events[i].t);
  const { x, top, bottom, end } = geom;
  let d = '';
  if (lane === 'fixed-window' || lane === 'fixed-window-first-hit' || lane === 'sliding-window-counter') {
    // Bands: every other window shaded (the window the count belongs to).
    windowStarts(lane, times, origin, period, end).forEach((s, k) => {
      if (k % 2 === 0 && s < end) d += `M${x(Math.max(0, s))} ${top}H${x(Math.min(end, s + period))}V${bottom}H${x(Math.max(0, s))}Z`;
    });
  }
  if (lane === 'sliding-window-counter') {
    // The previous window's count, weighing (period − elapsed) / period: a ramp down across each window.
    const cap = decisions[mine[0]]?.capacity || 1;
    const counts = new Map();
    for (const i of mine) {
      if (!decisions[i].allowed) continue;
      const w = Math.floor((events[i].t + origin) / period);
      counts.set(w, (counts.get(w) || 0) + events[i].cost);
    }
    for (const [w, n] of counts) {
      const s = (w + 1) * period - origin;
      if (s >= end) continue;
      const h = Math.min(1, n / cap) * (bottom - top);
      d += `M${x(s)} ${bottom}V${(bottom - h).toFixed(1)}L${x(Math.min(end, s + period))} ${bottom}Z`;
    }
  }
  if (lane === 'moving-window') {
    // At the first blocked request of each run, the span of the last period: it held the limit's
    // worth of admitted requests.
    let wasAllowed = true;
    for (const i of mine) {
      if (decisions[i].allowed) { wasAllowed = true; continue; }
      if (!wasAllowed) continue;
      wasAllowed = false;
      const t = events[i].t;
      d += `M${x(Math.max(0, t - period))} ${top + 2}H${x(t)}v4H${x(Math.max(0, t - period))}Z`;
    }
  }
  return d;
}

window.floodgateTrace = { parseTraceText, firstPeriod, seedsPicture };

// ---- the playground with a loaded file (uses app.js's pg, $, showError, sync…, at call time) ----

async function loadTraceFile() {
  const input = $('trace-file');
  const file = input.files[0];
  if (!file) return;
  const parsed = parseTraceText(await file.text(), MAX_EVENTS);
  if (parsed.error) {
    showError(`${file.name}: ${parsed.error}`);
    return;
  }
  stopStream();
  pg.trace = parsed.events;
  pg.origin = parsed.origin;
  pg.file = { name: file.name, focus: parsed.focus, origin: parsed.origin, keys: parsed.keys, bad: parsed.bad,
    examples: parsed.examples, period: firstPeriod(pg.settings.limit) };
  resetDecisions();
  showError('');
  sync();
}

function leaveFile() {
  if (!pg.file) return;
  pg.file = null;
  pg.trace = [];
  $('trace-file').value = '';
  resetDecisions();
}

// Allowed and blocked per 2-pixel column: bars up (allowed) and down (blocked) from the middle of
// the dot rows, each kind on its own scale.
function columnBars(lane, x, width) {
  const col = 2, cols = Math.ceil(width / col);
  const ca = new Array(cols).fill(0), cb = new Array(cols).fill(0);
  for (let i = 0; i < lane.decisions.length; i++) {
    const c = Math.min(cols - 1, Math.max(0, Math.floor(Number(x(pg.trace[i].t)) / col)));
    (lane.decisions[i].allowed ? ca : cb)[c] += 1;
  }
  const pa = Math.max(1, ...ca), pb = Math.max(1, ...cb);
  let a = '', b = '';
  for (let c = 0; c < cols; c++) {
    if (ca[c]) a += `M${c * col} 19h1.7v-${Math.max(1, ca[c] / pa * 15).toFixed(1)}h-1.7Z`;
    if (cb[c]) b += `M${c * col} 21h1.7v${Math.max(1, cb[c] / pb * 13).toFixed(1)}h-1.7Z`;
  }
  return [a, b];
}

// The whole file on the width of the plot: every request as a dot or cross while they fit, else
// bars per column; the level and the seeds' picture of the focus key under them.
function renderFile() {
  const f = pg.file;
  const span = Math.max(1, pg.trace.length ? pg.trace[pg.trace.length - 1].t : 1) * 1.02;
  const width = pg.lanes.get(LANES[0]).plot.clientWidth || 800;
  const height = pg.lanes.get(LANES[0]).plot.clientHeight || 64;
  const x = (t) => (t / span * (width - 8) + 4).toFixed(1);
  const levelTop = 36, levelBottom = height - 3;
  const aggregate = pg.trace.length > width / 4;
  for (const [name, lane] of pg.lanes) {
    let a = '', b = '', level = `M4 ${levelBottom}`;
    const [barsA, barsB] = aggregate ? columnBars(lane, x, width) : ['', ''];
    for (let i = 0; i < lane.decisions.length; i++) {
      const d = lane.decisions[i];
      const px = Number(x(pg.trace[i].t));
      if (!aggregate) {
        if (d.allowed) a += `M${(px - 3.5).toFixed(1)} 12a3.5 3.5 0 1 0 7 0a3.5 3.5 0 1 0-7 0`;
        else b += `M${(px - 3.5).toFixed(1)} 24.5l7 7m0-7l-7 7`;
      }
      if (pg.trace[i].key === f.focus) {
        const y = d.capacity > 0 ? levelBottom - Math.min(1, d.level / d.capacity) * (levelBottom - levelTop) : levelBottom;
        level += `H${px.toFixed(1)}V${y.toFixed(1)}`;
      }
    }
    level += `H${width - 4}`;
    lane.dotsA.setAttribute('d', a);
    lane.dotsB.setAttribute('d', b);
    lane.barsA.setAttribute('d', barsA);
    lane.barsB.setAttribute('d', barsB);
    lane.level.setAttribute('d', level);
    lane.levelFill.setAttribute('d', `${level}V${levelBottom}H4Z`);
    lane.seeds.setAttribute('d', seedsPicture(name, pg.trace, lane.decisions, f.focus, f.origin, f.period,
      { x, top: levelTop, bottom: levelBottom, end: span }));
    lane.a.textContent = lane.allowed;
    lane.b.textContent = lane.blocked;
  }
  drawConcurrency(0, span, x, false);
  drawAxis(0, span, width, span);
  const decided = pg.lanes.get(LANES[0]).decisions.length;
  $('status').textContent = `${f.name}: ${pg.trace.length} requests from ${f.keys} keys, ${decided} decided` +
    (f.bad ? `; ${f.bad} lines skipped (${f.examples.join('; ')})` : '') + `; level and windows of key ${f.focus}`;
}
