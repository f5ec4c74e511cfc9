// floodgate dashboard: the playground (decisions from POST /v1/simulate) and the live view
// (GET /v1/live). Plain JavaScript, no framework, no build step, nothing from another origin.
'use strict';

const LANES = ['fixed-window', 'fixed-window-first-hit', 'moving-window', 'sliding-window-counter',
  'token-bucket', 'leaky-bucket', 'gcra'];
const MAX_EVENTS = 10000;  // the service's bound on a trace
const VIEW_SECONDS = 30;   // the playground shows the last 30 s
const SVG_NS = 'http://www.w3.org/2000/svg';
const $ = (id) => document.getElementById(id);

// ---- the admin token ---------------------------------------------------------------------------
// /v1/simulate and /v1/live need `Authorization: Bearer <token>` (docs/http-api.md). The token comes
// from the address (`/#token=…`, or `/#live&token=…`; a fragment never reaches the server or its
// logs), is kept in this tab's sessionStorage and removed from the address bar; or it is typed in
// the form that appears when the service refuses a request.
const TOKEN_KEY = 'floodgate-admin-token';
(function takeTokenFromAddress() {
  const parts = location.hash.replace(/^#/, '').split('&');
  const given = parts.find((p) => p.startsWith('token='));
  if (!given) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(given.slice('token='.length)));
  const rest = parts.filter((p) => p !== given).join('&');
  history.replaceState(null, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
})();
async function adminFetch(url, options = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = { ...(options.headers || {}) };
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(url, { ...options, headers });
  if (res.status === 401 || res.status === 403) {
    $('admin').hidden = false;
    // 403: no token is configured, so none typed here could work: the form says so, no field.
    const none = res.status === 403;
    $('admin-token-field').hidden = none;
    $('admin-use').hidden = none;
    $('admin-msg').textContent = none
      ? 'The playground and the live view need an admin token, and the service has none: start it with FLOODGATE_ADMIN_TOKEN or admin.token_file.'
      : (token ? 'The service refused this token.' : 'The service needs its admin token.');
  }
  return res;
}
// The service answered 401 or 403: the form above says why; nothing was decided.
const refusedForToken = (res) => res.status === 401 || res.status === 403;
function initAdminForm() {
  $('admin').addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('admin-token').value.trim());
    $('admin-token').value = '';
    $('admin').hidden = true;
    route();
    validate();
  });
}

// ---- measurements the browser test reads (window.floodgate.stats()) ----------------------------
const perf = { frameGaps: [], lags: [], lastFrame: 0, simulateMs: [], readyMs: null };
function frameTick(ts) {
  if (perf.lastFrame) perf.frameGaps.push(ts - perf.lastFrame);
  if (perf.frameGaps.length > 2000) perf.frameGaps.splice(0, 1000);
  perf.lastFrame = ts;
  requestAnimationFrame(frameTick);
}
requestAnimationFrame(frameTick);
(function lagProbe() {  // event-loop lag: how late a 50 ms timer fires
  const due = performance.now() + 50;
  setTimeout(() => {
    perf.lags.push(performance.now() - due);
    if (perf.lags.length > 2000) perf.lags.splice(0, 1000);
    lagProbe();
  }, 50);
})();
function percentile(values, p) {
  if (!values.length) return 0;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

// ---- the playground ---------------------------------------------------------------------------
const pg = {
  settings: { limit: '5 per 10 seconds', burst: 5, key: 'a', concurrency: { limit: 3, lease_ttl_ms: 10000, duration_ms: 2000 } },
  generation: 0,    // bumps when the settings or the trace are reset: late answers are dropped
  trace: [],        // {t, key, cost}; t in seconds since `start`
  start: 0,         // performance.now() at the first request
  origin: 0,        // Date.now() / 1000 at the first request: clock-aligned windows follow the wall clock
  lanes: new Map(), // name → {decisions: [], allowed, blocked, policy, el}
  conc: null,       // the concurrency lane: {decisions: [], held: [{t, held}], totals, el…}
  inflight: false,
  stream: null,     // {timer, rate, next}
  dirty: true,
  file: null,       // a loaded trace file: {name, focus, origin, period, keys, bad, examples}
};

function now() { return pg.trace.length ? (performance.now() - pg.start) / 1000 : 0; }

function buildLanes() {
  const box = $('lanes');
  box.textContent = '';
  pg.lanes.clear();
  buildConcurrencyLane(box);
  for (const name of LANES) {
    const lane = document.createElement('div');
    lane.className = 'lane';
    lane.dataset.lane = name;
    lane.innerHTML = `<div class="lane-head"><div class="lane-name">${name}</div>` +
      '<div class="lane-policy"></div><div class="counts">allowed <span class="a allowed-count">0</span>' +
      ' · blocked <span class="b blocked-count">0</span></div></div>' +
      `<svg class="plot" role="img" aria-label="${name}: requests over time">` +
      '<path class="seeds"/><path class="level-fill"/><path class="level"/><path class="dots-allowed dot-allowed"/>' +
      '<path class="dots-blocked x-blocked"/><path class="bars-a"/><path class="bars-b"/></svg>';
    box.appendChild(lane);
    pg.lanes.set(name, {
      decisions: [], allowed: 0, blocked: 0, el: lane,
      policy: lane.querySelector('.lane-policy'), plot: lane.querySelector('svg'),
      a: lane.querySelector('.allowed-count'), b: lane.querySelector('.blocked-count'),
      levelFill: lane.querySelector('.level-fill'), level: lane.querySelector('path.level'),
      dotsA: lane.querySelector('.dots-allowed'), dotsB: lane.querySelector('.dots-blocked'),
      seeds: lane.querySelector('.seeds'), barsA: lane.querySelector('.bars-a'), barsB: lane.querySelector('.bars-b'),
    });
  }
}

// The concurrency lane (first, above the algorithm lanes): a dot or cross per request at its start,
// and the leases held over time (a step line) against N (dashed).
function buildConcurrencyLane(box) {
  const lane = document.createElement('div');
  lane.className = 'lane lane-conc';
  lane.dataset.lane = 'concurrency';
  lane.innerHTML = '<div class="lane-head"><div class="lane-name">concurrency</div>' +
    '<div class="lane-policy"></div><div class="counts">admitted <span class="a allowed-count">0</span>' +
    ' · denied <span class="b blocked-count">0</span><br>max held <span class="max-held">0</span>' +
    ' · freed at TTL <span class="expired-count">0</span></div></div>' +
    '<svg class="plot plot-conc" role="img" aria-label="concurrency: requests and leases held over time">' +
    '<path class="level-fill"/><path class="limit-line"/><path class="level"/><path class="dots-allowed dot-allowed"/>' +
    '<path class="dots-blocked x-blocked"/></svg>';
  box.appendChild(lane);
  const q = (c) => lane.querySelector(c);
  pg.conc = {
    decisions: [], held: [], admitted: 0, denied: 0, maxHeld: 0, expired: 0, limit: 0, key: '', el: lane,
    policy: q('.lane-policy'), plot: q('svg'), a: q('.allowed-count'), b: q('.blocked-count'),
    most: q('.max-held'), gone: q('.expired-count'), levelFill: q('.level-fill'), level: q('path.level'),
    limitLine: q('.limit-line'), dotsA: q('.dots-allowed'), dotsB: q('.dots-blocked'),
  };
}

function takeConcurrency(c, from) {
  const lane = pg.conc;
  lane.decisions.length = from;
  for (const d of c.decisions) lane.decisions.push(d);
  lane.held = c.held;
  lane.admitted = c.admitted;
  lane.denied = c.denied;
  lane.maxHeld = c.max_held;
  lane.expired = c.expired;
  lane.limit = c.limit;
  lane.key = c.key;
  lane.policy.textContent = c.policy;
}

// Draws the concurrency lane between times begin and end (seconds) on x(t).
function drawConcurrency(begin, end, x, spreadSame) {
  const lane = pg.conc;
  const height = lane.plot.clientHeight || 96;
  const width = lane.plot.clientWidth || 800;
  const yA = 12, yB = 28, top = 40, bottom = height - 3;
  const y = (held) => (bottom - Math.min(1, held / Math.max(1, lane.limit)) * (bottom - top)).toFixed(1);
  let a = '', b = '', lastA = -1e9, lastB = -1e9, prevT = NaN, spread = 0;
  const n = Math.min(lane.decisions.length, pg.trace.length);
  for (let i = spreadSame ? firstAtOrAfter(begin) : 0; i < n; i++) {
    const t = pg.trace[i].t;
    if (t > end) break;
    spread = spreadSame && t === prevT ? Math.min(spread + 4, 60) : 0;
    prevT = t;
    const px = Number(x(t)) + spread;
    if (lane.decisions[i].admitted) {
      if (px - lastA >= 1.5) { a += `M${(px - 3.5).toFixed(1)} ${yA}a3.5 3.5 0 1 0 7 0a3.5 3.5 0 1 0-7 0`; lastA = px; }
    } else if (px - lastB >= 1.5) {
      b += `M${(px - 3.5).toFixed(1)} ${yB - 3.5}l7 7m0-7l-7 7`;
      lastB = px;
    }
  }
  // The held line: the level at `begin`, then every change up to `end` (leases of requests still
  // in progress end after the last request: the line runs on to them).
  let held = 0, k = 0;
  while (k < lane.held.length && lane.held[k].t < begin) held = lane.held[k++].held;
  let level = `M${x(begin)} ${y(held)}`;
  for (; k < lane.held.length && lane.held[k].t <= end; k++) level += `H${x(lane.held[k].t)}V${y(lane.held[k].held)}`;
  level += `H${width}`;
  lane.dotsA.setAttribute('d', a);
  lane.dotsB.setAttribute('d', b);
  lane.level.setAttribute('d', level);
  lane.levelFill.setAttribute('d', `${level}V${bottom}H${x(begin)}Z`);
  lane.limitLine.setAttribute('d', lane.limit ? `M0 ${top}H${width}` : '');
  lane.a.textContent = lane.admitted;
  lane.b.textContent = lane.denied;
  lane.most.textContent = lane.maxHeld;
  lane.gone.textContent = lane.expired;
}

function showError(text) {
  const e = $('error');
  e.hidden = !text;
  e.textContent = text || '';
}

function addRequests(n) {
  if (pg.file) leaveFile();
  if (pg.trace.length === 0) {
    pg.start = performance.now();
    pg.origin = Date.now() / 1000;
  }
  const room = MAX_EVENTS - pg.trace.length;
  if (room <= 0) {
    stopStream();
    showError(`The trace is full (${MAX_EVENTS} requests, the service's bound): press Reset to start again.`);
    return;
  }
  const t = Math.round(now() * 1e6) / 1e6;
  for (let i = 0; i < Math.min(n, room); i++) pg.trace.push({ t, key: pg.settings.key, cost: 1 });
  sync();
}

// Sends the whole trace (exact: every strategy replays it from the start on a fresh store) and
// asks only for the decisions it does not have yet ("from"). One request in flight at a time;
// requests that arrive meanwhile go with the next one.
async function sync() {
  if (pg.inflight) return;
  const first = pg.lanes.get(LANES[0]);
  const from = first.decisions.length;
  if (from >= pg.trace.length) return;
  pg.inflight = true;
  const generation = pg.generation;
  const body = JSON.stringify({
    limit: pg.settings.limit, burst: pg.settings.burst, strategies: LANES,
    concurrency: pg.settings.concurrency, origin: pg.origin, from, trace: pg.trace,
  });
  const sent = performance.now();
  try {
    const res = await adminFetch('/v1/simulate', { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
    if (refusedForToken(res)) { if (generation === pg.generation) showError('Not decided: the service needs the admin token (above).'); return; }
    const json = await res.json();
    if (generation !== pg.generation) return;
    if (!res.ok) {
      showError(`The service rejected the settings: ${json.error}`);
      return;
    }
    perf.simulateMs.push(performance.now() - sent);
    showError('');
    for (const s of json.strategies) {
      const lane = pg.lanes.get(s.strategy);
      lane.decisions.length = json.from;  // exact replay: keep what matched, append the rest
      for (const d of s.decisions) lane.decisions.push(d);
      lane.allowed = s.allowed;
      lane.blocked = s.blocked;
      lane.policy.textContent = s.policy;
    }
    takeConcurrency(json.concurrency, json.from);
    pg.dirty = true;
  } catch (err) {
    if (generation === pg.generation) showError(`The service did not answer: ${err}`);
  } finally {
    if (generation === pg.generation) {
      pg.inflight = false;
      if (pg.lanes.get(LANES[0]).decisions.length < pg.trace.length && !$('error').textContent) sync();
    }
  }
}

function resetDecisions() {
  pg.generation++;
  pg.inflight = false;
  for (const lane of pg.lanes.values()) {
    lane.decisions = [];
    lane.allowed = lane.blocked = 0;
  }
  Object.assign(pg.conc, { decisions: [], held: [], admitted: 0, denied: 0, maxHeld: 0, expired: 0 });
  pg.dirty = true;
}

function startStream() {
  const rate = Math.min(100, Math.max(0.1, Number($('rate').value) || 5));
  $('rate').value = rate;
  const tick = 1000 / Math.min(rate, 50);  // at most 50 timer ticks a second; more per tick above
  pg.stream = { rate, carry: 0, last: performance.now() };
  pg.stream.timer = setInterval(() => {
    const t = performance.now();
    pg.stream.carry += (t - pg.stream.last) / 1000 * pg.stream.rate;
    pg.stream.last = t;
    const n = Math.floor(pg.stream.carry);
    if (n > 0) {
      pg.stream.carry -= n;
      addRequests(n);
    }
  }, tick);
  const b = $('stream');
  b.textContent = 'Pause';
  b.setAttribute('aria-pressed', 'true');
}

function stopStream() {
  if (pg.stream) clearInterval(pg.stream.timer);
  pg.stream = null;
  pg.dirty = true;
  const b = $('stream');
  b.textContent = 'Start stream';
  b.setAttribute('aria-pressed', 'false');
}

// The index of the first event at or after time t (binary search over the sorted trace).
function firstAtOrAfter(t) {
  let lo = 0, hi = pg.trace.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (pg.trace[mid].t < t) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function render() {
  if (pg.file) { renderFile(); return; }
  for (const lane of pg.lanes.values()) ['seeds', 'barsA', 'barsB'].forEach((k) => lane[k].setAttribute('d', ''));
  const end = Math.max(VIEW_SECONDS, pg.stream || pg.inflight ? now() : (pg.trace.length ? pg.trace[pg.trace.length - 1].t : 0) + 1);
  const begin = end - VIEW_SECONDS;
  const plot = pg.lanes.get(LANES[0]).plot;
  const width = plot.clientWidth || 800;
  const height = plot.clientHeight || 64;
  const x = (t) => ((t - begin) / VIEW_SECONDS * (width - 8) + 4).toFixed(1);
  const yA = 12, yB = 28, levelTop = 36, levelBottom = height - 3;
  const i0 = firstAtOrAfter(begin);
  for (const lane of pg.lanes.values()) {
    const n = lane.decisions.length;
    let a = '', b = '';
    const last = i0 > 0 && i0 - 1 < n ? lane.decisions[i0 - 1] : null;
    const yl = (d) => (d && d.capacity > 0 ? levelBottom - Math.min(1, d.level / d.capacity) * (levelBottom - levelTop) : levelBottom).toFixed(1);
    let level = `M0 ${yl(last)}`;
    // Requests at the same instant (a burst) are spread 4 px apart so that each one shows; marks
    // closer than 1.5 px to the previous mark of their row would be invisible and are not drawn
    // (a 100 req/s stream would otherwise put thousands of overlapping marks in each row).
    let lastA = -1e9, lastB = -1e9, prevT = NaN, spread = 0;
    for (let i = i0; i < n; i++) {
      const d = lane.decisions[i];
      const t = pg.trace[i].t;
      spread = t === prevT ? Math.min(spread + 4, 60) : 0;
      prevT = t;
      const px = Number(x(t)) + spread;
      if (d.allowed) {
        if (px - lastA >= 1.5) { a += `M${(px - 3.5).toFixed(1)} ${yA}a3.5 3.5 0 1 0 7 0a3.5 3.5 0 1 0-7 0`; lastA = px; }
      } else if (px - lastB >= 1.5) {
        b += `M${(px - 3.5).toFixed(1)} ${yB - 3.5}l7 7m0-7l-7 7`;
        lastB = px;
      }
      level += `H${px.toFixed(1)}V${yl(d)}`;
    }
    const lastX = n > 0 && i0 < n ? x(pg.trace[n - 1].t) : 0;
    level += `H${Math.max(lastX, 0)}`;
    lane.dotsA.setAttribute('d', a);
    lane.dotsB.setAttribute('d', b);
    lane.level.setAttribute('d', level);
    lane.levelFill.setAttribute('d', `${level}V${levelBottom}H0Z`);
    lane.a.textContent = lane.allowed;
    lane.b.textContent = lane.blocked;
  }
  drawConcurrency(begin, end, x, true);
  drawAxis(begin, end, width);
  const decided = pg.lanes.get(LANES[0]).decisions.length;
  $('status').textContent = `${pg.trace.length} request${pg.trace.length === 1 ? '' : 's'} sent, ${decided} decided` +
    (pg.stream ? ` · streaming ${pg.stream.rate}/s` : '');
}

function drawAxis(begin, end, width, view = VIEW_SECONDS) {
  const axis = $('axis');
  const raw = view / 6, p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
  let html = '';
  for (let t = Math.ceil(begin / step) * step; t <= end + 1e-9; t += step) {
    if (t < 0) continue;
    const px = ((t - begin) / view * (width - 8) + 4).toFixed(1);
    const anchor = px < 20 ? 'start' : px > width - 20 ? 'end' : 'middle';
    html += `<line x1="${px}" x2="${px}" y1="0" y2="5"/><text x="${px}" y="17" text-anchor="${anchor}">${t.toFixed(0)} s</text>`;
  }
  axis.innerHTML = html;
}

// Redraws when an answer arrived, and while streaming at most every 50 ms (the view scrolls by
// about 1.5 pixels in that time).
let lastRender = 0;
function playgroundFrame(ts) {
  if (!$('playground').hidden && (pg.dirty || (pg.stream && ts - lastRender >= 50))) {
    pg.dirty = false;
    lastRender = ts;
    render();
  }
  requestAnimationFrame(playgroundFrame);
}

function applySettings(ev) {
  if (ev) ev.preventDefault();
  const limit = $('limit').value.trim();
  const burst = Math.max(0, Math.floor(Number($('burst').value) || 0));
  const key = $('key').value.trim() || 'a';
  // Seconds on the page, whole numbers in the API: what is not a number goes as typed, and the
  // service's 400 names the field.
  const number = (id) => (Number.isFinite(Number($(id).value)) && $(id).value.trim() !== '' ? Number($(id).value) : $(id).value);
  const ms = (id) => { const v = number(id); return typeof v === 'number' ? Math.round(v * 1000) : v; };
  const concurrency = { limit: number('conc-n'), lease_ttl_ms: ms('conc-ttl'), duration_ms: ms('conc-dur') };
  pg.settings = { limit, burst, key, concurrency };
  if (pg.file) pg.file.period = window.floodgateTrace.firstPeriod(limit);
  resetDecisions();  // the same traffic, decided again under the new settings
  showError('');
  if (pg.trace.length) sync(); else validate();
}

// With no traffic yet, ask the service whether the settings are valid (an empty trace).
async function validate() {
  const res = await adminFetch('/v1/simulate', { method: 'POST', body: JSON.stringify({
    limit: pg.settings.limit, burst: pg.settings.burst, strategies: LANES, concurrency: pg.settings.concurrency, trace: [] }) });
  if (refusedForToken(res)) { showError('Not decided: the service needs the admin token (above).'); return; }
  const json = await res.json();
  if (!res.ok) { showError(`The service rejected the settings: ${json.error}`); return; }
  for (const s of json.strategies) pg.lanes.get(s.strategy).policy.textContent = s.policy;
  takeConcurrency(json.concurrency, 0);
  pg.dirty = true;
  if (perf.readyMs === null) perf.readyMs = performance.now();  // since navigation start
}

function initPlayground() {
  buildLanes();
  $('settings').addEventListener('submit', applySettings);
  $('hit').addEventListener('click', () => addRequests(1));
  $('burst-send').addEventListener('click', () => addRequests(Math.max(1, Math.min(1000, Number($('burst-n').value) || 1))));
  $('stream').addEventListener('click', () => (pg.stream ? stopStream() : startStream()));
  $('trace-file').addEventListener('change', loadTraceFile);
  $('reset').addEventListener('click', () => {
    stopStream();
    leaveFile();
    pg.trace = [];
    resetDecisions();
    showError('');
  });
  window.addEventListener('resize', () => { pg.dirty = true; });
  validate();
  requestAnimationFrame(playgroundFrame);
}

// ---- the live view ----------------------------------------------------------------------------
const live = { timer: null, cards: new Map() };

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

function policyCard(name) {
  const card = document.createElement('article');
  card.className = 'policy';
  card.dataset.policy = name;
  card.innerHTML = `<h2>${escapeHtml(name)}<span class="badge state"></span><span class="badge info mode"></span></h2>` +
    '<div class="desc"></div><div class="figures">' +
    '<span>allowed <b class="rate-allowed">0</b>/s</span><span>denied <b class="rate-denied">0</b>/s</span>' +
    '<span>total allowed <b class="total-allowed">0</b></span><span>total denied <b class="total-denied">0</b></span>' +
    '<span>degraded <b class="total-degraded">0</b></span></div>' +
    '<svg class="bars" role="img" aria-label="allowed and denied per second"></svg><div class="axis"></div>' +
    '<table><thead><tr><th>most denied keys (last 1–2 min)</th><th class="n">denied</th></tr></thead><tbody></tbody></table>';
  $('policies').appendChild(card);
  return card;
}

// Stacked bars per second: allowed (green) under denied (vermillion). The last second is still
// filling and is not drawn; the chart spans the last minute, or longer once there is older traffic,
// the same span on every card, with its axis under it.
// The seconds every card draws: from the first second any policy saw a request (at most 60 s
// before the last complete one), so that the cards share one time axis.
function liveStart(policies) {
  let start = Infinity;
  for (const p of policies) {
    const total = p.allowed.length - 1;
    let first = 0;
    while (first < total && p.allowed[first] + p.denied[first] === 0) first++;
    start = Math.min(start, Math.min(first, total - 60));
  }
  return Number.isFinite(start) ? Math.max(0, start) : 0;
}

function drawBars(svg, allAllowed, allDenied, start) {
  const width = svg.clientWidth || 500;
  const height = svg.clientHeight || 90;
  const total = allAllowed.length - 1;
  const allowed = allAllowed.slice(start, total);
  const denied = allDenied.slice(start, total);
  const n = allowed.length;
  let max = 1;
  for (let i = 0; i < n; i++) max = Math.max(max, allowed[i] + denied[i]);
  const w = width / n;
  let a = '', d = '';
  for (let i = 0; i < n; i++) {
    const ha = allowed[i] / max * (height - 14);
    const hd = denied[i] / max * (height - 14);
    const x = (i * w).toFixed(1);
    const bw = Math.max(1, w - 0.5).toFixed(1);
    if (ha > 0) a += `M${x} ${(height - ha).toFixed(1)}h${bw}v${ha.toFixed(1)}h-${bw}Z`;
    if (hd > 0) d += `M${x} ${(height - ha - hd).toFixed(1)}h${bw}v${hd.toFixed(1)}h-${bw}Z`;
  }
  svg.innerHTML = `<path class="bar-a" d="${a}"/><path class="bar-d" d="${d}"/>` +
    `<text x="4" y="11" font-size="10" fill="#555">top of the chart ${max}/s · ` +
    '<tspan fill="#00664a">■ allowed</tspan> <tspan fill="#a33d00">■ denied</tspan></text>';
  const axis = svg.parentNode.querySelector('.axis');
  if (axis) axis.innerHTML = `<span>−${n} s</span><span>now</span>`;
}

async function refreshLive() {
  try {
    const res = await adminFetch('/v1/live', { cache: 'no-store' });
    if (refusedForToken(res)) {
      const e = $('live-error');
      e.hidden = false;
      e.textContent = 'Nothing to show: the service needs the admin token (above).';
      return;
    }
    const json = await res.json();
    if (!res.ok) throw new Error(json.error || res.status);
    $('live-error').hidden = true;
    const st = json.storage;
    $('storage').innerHTML = `Storage ${escapeHtml(st.url)}: ` + (st.degraded
      ? `<span class="badge degraded">degraded</span> (failed ${st.last_degraded_ago} s ago; ${st.degraded_total} decisions by fail mode)`
      : '<span class="badge ok">ok</span>' + (st.degraded_total ? ` (${st.degraded_total} degraded decisions since start)` : '')) +
      (st.servers || []).map((s) => ` · ${escapeHtml(s.name)}: ` + (s.breaker === 'open'
        ? '<span class="badge degraded">breaker open</span>'
        : s.reconnecting ? '<span class="badge degraded">reconnecting</span>'
          : `<span class="badge ok">breaker closed</span> ${s.connections} conn.`)).join('');
    const start = liveStart(json.policies);
    for (const p of json.policies) {
      const idle = p.totals.allowed + p.totals.denied + p.totals.shadow_denied + p.totals.degraded === 0;
      if (p.name === 'inline' && idle && !live.cards.has(p.name)) continue;  // shown once used
      let card = live.cards.get(p.name);
      if (!card) { card = policyCard(p.name); live.cards.set(p.name, card); }
      card.querySelector('.desc').textContent = p.policy;
      const state = card.querySelector('.state');
      state.textContent = p.state;
      state.className = `badge state ${p.state === 'ok' ? 'ok' : 'degraded'}`;
      card.querySelector('.mode').textContent = `fail ${p.fail}${p.shadow ? ' · shadow' : ''}`;
      const last = p.allowed.length - 2;  // the last complete second
      card.querySelector('.rate-allowed').textContent = p.allowed[last];
      card.querySelector('.rate-denied').textContent = p.denied[last];
      card.querySelector('.total-allowed').textContent = p.totals.allowed;
      card.querySelector('.total-denied').textContent = p.totals.denied + p.totals.shadow_denied;
      card.querySelector('.total-degraded').textContent = p.totals.degraded;
      drawBars(card.querySelector('.bars'), p.allowed, p.denied, start);
      card.querySelector('tbody').innerHTML = p.top_denied.length
        ? p.top_denied.map((k) => `<tr><td>${escapeHtml(k.key)}</td><td class="n">${k.count}${k.error ? ` (±${k.error})` : ''}</td></tr>`).join('')
        : '<tr><td class="empty" colspan="2">no denials</td></tr>';
    }
    window.floodgateRlqs.drawRlqs($('rlqs'), json.rlqs, escapeHtml);
    document.body.dataset.liveUpdated = String(Date.now());
  } catch (err) {
    const e = $('live-error');
    e.hidden = false;
    e.textContent = `The service did not answer: ${err}`;
  }
}

// ---- tabs -------------------------------------------------------------------------------------
function route() {
  const tab = location.hash === '#live' ? 'live' : 'playground';
  $('playground').hidden = tab !== 'playground';
  $('live').hidden = tab !== 'live';
  for (const t of ['playground', 'live']) {
    const a = $(`tab-${t}`);
    if (t === tab) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  clearInterval(live.timer);
  live.timer = null;
  if (tab === 'live') {
    refreshLive();
    live.timer = setInterval(refreshLive, 1000);
  } else {
    pg.dirty = true;
  }
}

window.floodgate = {
  stats() {
    const first = pg.lanes.get(LANES[0]);
    return {
      requests: pg.trace.length,
      decided: first ? first.decisions.length : 0,
      frameGapP95: percentile(perf.frameGaps, 0.95),
      frameGapMax: Math.max(0, ...perf.frameGaps),
      lagP95: percentile(perf.lags, 0.95),
      lagMax: Math.max(0, ...perf.lags),
      simulateP95: percentile(perf.simulateMs, 0.95),
      readyMs: perf.readyMs,
    };
  },
  resetStats() { perf.frameGaps = []; perf.lags = []; perf.simulateMs = []; perf.lastFrame = 0; },
};

initAdminForm();
initPlayground();
window.addEventListener('hashchange', route);
route();
