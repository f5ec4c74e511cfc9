// The dashboard in a real browser (Debian's chromium through playwright-core) against the real
// `floodgate serve` binary on a loopback port.
//   node dashboard_test.mjs /path/to/floodgate ARTIFACT_DIR
// Checks: the page loads in < 1 s; Hit past the limit gives a blocked request and changed counts in
// every lane, and the concurrency lane denies the request over N; a 100 req/s stream grows every lane while the page stays responsive (frame gaps and
// event-loop lag measured in the page); the live view's counters and most-denied keys follow
// requests to /v1/hit; the RLQS panel lists the server's quota rule; nothing is fetched from another origin; a narrow screen does not overflow.
// Writes screenshots and figures.json to ARTIFACT_DIR.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [binary, artifacts] = process.argv.slice(2);
if (!binary || !artifacts) {
  console.error('usage: node dashboard_test.mjs FLOODGATE_BINARY ARTIFACT_DIR');
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const LANES = ['fixed-window', 'fixed-window-first-hit', 'moving-window', 'sliding-window-counter',
  'token-bucket', 'leaky-bucket', 'gcra'];
const failures = [];
const figures = {};
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, timeoutMs = 10000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}

// ---- the service ------------------------------------------------------------------------------
const dir = mkdtempSync(path.join(tmpdir(), 'floodgate-browser-'));
writeFileSync(path.join(dir, 'floodgate.yaml'), `
policies:
  - name: api
    strategy: gcra
    limit: 20/second
    burst: 20
  - name: login
    strategy: fixed-window
    limit: 5/hour
    key: {header: X-Real-IP}
    fail: closed
`);
// An RLQS rule (Envoy's quota service): the live view's split panel lists it.
mkdirSync(path.join(dir, 'rlqs.d'));
writeFileSync(path.join(dir, 'rlqs.d', 'edge.yaml'), 'domain: edge\nbuckets:\n  - match: {api: chat}\n    limit: 600/minute\n');
const portFile = path.join(dir, 'port');
// The admin token the page is given through its address (/#token=…), as scripts/run.sh prints it.
const adminToken = 'browser-test-admin-token-0123';
const server = spawn(binary, ['serve', '--config', path.join(dir, 'floodgate.yaml'), '--listen', '127.0.0.1:0',
  '--port-file', portFile, '--threads', '2', '--log-level', 'warn', '--grpc-listen', '127.0.0.1:0',
  '--rlqs-config', path.join(dir, 'rlqs.d')],
  { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, FLOODGATE_ADMIN_TOKEN: adminToken } });
let browser;
async function cleanup() {
  if (browser) await browser.close().catch(() => {});
  server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}

try {
  const port = await until('the port file', () => existsSync(portFile) && readFileSync(portFile, 'utf8').trim());
  const base = `http://127.0.0.1:${port}`;
  const hit = (policy, key) => fetch(`${base}/v1/hit`, { method: 'POST', body: JSON.stringify({ policy, key }) });

  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const foreign = [];
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('data:')) foreign.push(r.url()); });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));

  // ---- page load ------------------------------------------------------------------------------
  const t0 = Date.now();
  await page.goto(`${base}/#token=${adminToken}`, { waitUntil: 'load' });
  const loadMs = Date.now() - t0;
  check(!page.url().includes('token='), 'the page takes the token out of the address bar');
  // Ready: the service has described every lane's policy (the page's first /v1/simulate answered).
  await until('the lanes described', () => page.$eval('[data-lane="gcra"] .lane-policy', (e) => e.textContent));
  const readyMs = await until('the ready time', () => page.evaluate(() => window.floodgate.stats().readyMs));
  const nav = await page.evaluate(() => {
    const n = performance.getEntriesByType('navigation')[0];
    return { domContentLoaded: n.domContentLoadedEventEnd, load: n.loadEventEnd };
  });
  figures.page_load_ms = loadMs;
  figures.page_ready_ms = readyMs;
  figures.navigation_timing_ms = nav;
  console.log(`page: load event after ${loadMs} ms (navigation timing ${nav.load.toFixed(1)} ms), ` +
    `lanes described by the service after ${readyMs.toFixed(1)} ms`);
  // The first load includes starting the renderer process: bounded loosely. The claim "loads in
  // under 1 s" is checked on the median of three loads in the running browser, so that one stall
  // of a machine shared with builds does not decide it.
  check(loadMs < 3000 && readyMs < 3000, `the first page load, renderer start included, < 3 s (${loadMs} ms, ready ${readyMs.toFixed(1)} ms)`);
  const again = [];
  for (let i = 0; i < 3; i++) {
    const t1 = Date.now();
    await page.goto(`${base}/?again=${i}`, { waitUntil: 'load' });
    const warmMs = Date.now() - t1;
    const warmReady = await until('the ready time (again)', () => page.evaluate(() => window.floodgate.stats().readyMs));
    const warmNav = await page.evaluate(() => performance.getEntriesByType('navigation')[0].loadEventEnd);
    again.push({ load_event: warmMs, navigation_timing: warmNav, ready: warmReady });
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const warmMs = median(again.map((a) => a.load_event));
  const warmReady = median(again.map((a) => a.ready));
  figures.page_load_again_ms = again;
  console.log(`page again (median of 3): load event after ${warmMs} ms, ready after ${warmReady.toFixed(1)} ms`);
  check(warmMs < 1000 && warmReady < 1000, `the page loads in < 1 s (median of 3: ${warmMs} ms, ready ${warmReady.toFixed(1)} ms)`);
  for (const lane of LANES) check(await page.$(`[data-lane="${lane}"]`) !== null, `lane ${lane} is drawn`);

  // ---- a bad limit gets the service's message ---------------------------------------------------
  await page.fill('#limit', '3/fortnight');
  await page.click('#apply');
  const err = await until('the error message', () => page.$eval('#error', (e) => !e.hidden && e.textContent));
  check(/fortnight/.test(err) && /unknown unit/.test(err), `a bad limit shows the service's error: ${err}`);

  // ---- Hit past the limit -----------------------------------------------------------------------
  // 3 per hour: no window edge or refill can fall within the few hundred ms of the test.
  await page.fill('#limit', '3/hour');
  await page.fill('#burst', '3');
  // The concurrency lane: 3 at once, each request lasting a minute (longer than the test).
  await page.fill('#conc-n', '3');
  await page.fill('#conc-ttl', '120');
  await page.fill('#conc-dur', '60');
  await page.click('#apply');
  await until('the error cleared', () => page.$eval('#error', (e) => e.hidden));
  const counts = () => page.evaluate((lanes) => Object.fromEntries(lanes.map((l) => {
    const el = document.querySelector(`[data-lane="${l}"]`);
    return [l, { a: Number(el.querySelector('.allowed-count').textContent), b: Number(el.querySelector('.blocked-count').textContent),
      blockedPath: el.querySelector('.dots-blocked').getAttribute('d') || '', allowedPath: el.querySelector('.dots-allowed').getAttribute('d') || '' }];
  })), LANES);
  for (let i = 0; i < 3; i++) await page.click('#hit');
  // The counts are drawn on the next animation frame after the answer: wait for every lane.
  const drawn = (n) => until(`${n} decisions drawn`, async () => {
    const c = await counts();
    return LANES.every((l) => c[l].a + c[l].b === n) ? c : null;
  });
  const before = await drawn(3);
  for (const l of LANES) {
    check(before[l].a === 3 && before[l].b === 0 && before[l].blockedPath === '',
      `${l}: 3 hits against 3/hour: allowed 3, blocked 0 (${before[l].a}/${before[l].b})`);
  }
  await page.click('#hit');
  const after = await drawn(4);
  for (const l of LANES) {
    const arcs = (after[l].allowedPath.match(/a3\.5/g) || []).length / 2;
    const crosses = (after[l].blockedPath.match(/l7 7/g) || []).length;
    // Marks closer than 1.5 px merge (quick clicks land ~1 px apart), so at least one of each.
    check(after[l].a === 3 && after[l].b === 1 && arcs >= 1 && arcs <= 3 && crosses === 1,
      `${l}: the 4th hit is blocked: counts ${after[l].a}/${after[l].b}, ${arcs} dot(s), ${crosses} cross`);
  }
  // The concurrency lane: 3 leases held, the 4th request denied; the held line climbs to N.
  const conc = await until('the concurrency lane drawn', () => page.$eval('[data-lane="concurrency"]', (el) => {
    const n = (c) => Number(el.querySelector(c).textContent);
    const d = (c) => el.querySelector(c).getAttribute('d') || '';
    const v = { a: n('.allowed-count'), b: n('.blocked-count'), most: n('.max-held'), gone: n('.expired-count'),
      crosses: (d('.dots-blocked').match(/l7 7/g) || []).length, steps: (d('path.level').match(/V/g) || []).length,
      limit: d('.limit-line'), policy: el.querySelector('.lane-policy').textContent };
    return v.a + v.b === 4 ? v : null;
  }));
  check(conc.a === 3 && conc.b === 1 && conc.most === 3 && conc.gone === 0 && conc.crosses === 1,
    `concurrency: 4 requests of a minute against 3 concurrent: admitted ${conc.a}, denied ${conc.b}, max held ${conc.most}, ${conc.crosses} cross`);
  check(conc.steps >= 3 && conc.limit !== '' && conc.policy === 'concurrency 3 concurrent for 2 minutes',
    `concurrency: the held line (${conc.steps} steps) against the dashed N; policy "${conc.policy}"`);
  // A lease time to live over a day (the form's own checks let it through) gets the service's
  // message naming the field.
  await page.fill('#conc-ttl', '100000');
  await page.click('#apply');
  const concErr = await until('the concurrency error', () => page.$eval('#error', (e) => !e.hidden && e.textContent));
  check(concErr.includes('"concurrency.lease_ttl_ms" must be'), `a bad lease TTL shows the service's error: ${concErr}`);
  await page.fill('#conc-ttl', '120');
  await page.click('#apply');
  await drawn(4);
  await page.screenshot({ path: path.join(artifacts, 'playground-hits.png'), fullPage: true });

  // ---- a 100 req/s stream ------------------------------------------------------------------------
  // The speed bounds are measured on a machine that may be busy with other work: when one is
  // missed, the stream runs once more and the second run decides (the figures of both are kept).
  const runStream = async () => {
    await page.click('#reset');
    await page.fill('#limit', '5 per 2 seconds');
    await page.fill('#burst', '8');
    await page.click('#apply');
    await page.fill('#rate', '100');
    await page.evaluate(() => window.floodgate.resetStats());
    await page.click('#stream');
    const streamStart = Date.now();
    await page.waitForTimeout(2000);
    const mid = await counts();
    await page.waitForTimeout(4000);
    const stats = await page.evaluate(() => window.floodgate.stats());
    const end = await counts();
    const streamSeconds = (Date.now() - streamStart) / 1000;
    await page.click('#stream');  // pause
    const paused = await page.evaluate(() => window.floodgate.stats());
    await page.waitForTimeout(600);
    const pausedLater = await page.evaluate(() => window.floodgate.stats());
    console.log(`stream: ${stats.requests} requests in ${streamSeconds.toFixed(1)} s, ${stats.decided} decided; ` +
      `frame gap p95 ${stats.frameGapP95.toFixed(1)} ms max ${stats.frameGapMax.toFixed(1)} ms; ` +
      `event-loop lag p95 ${stats.lagP95.toFixed(1)} ms max ${stats.lagMax.toFixed(1)} ms; /v1/simulate p95 ${stats.simulateP95.toFixed(1)} ms`);
    // Responsive in RAIL's sense: input is handled within 100 ms (the main thread is never busy
    // longer than that at the 95th percentile) and the page keeps drawing at ≥ 10 frames a second.
    // On an idle machine both p95 figures are ~17-22 ms (docs/benchmarks.md).
    const fast = stats.requests >= 0.85 * 100 * streamSeconds && stats.decided >= stats.requests - 100 &&
      stats.frameGapP95 < 100 && stats.lagP95 < 100;
    return { mid, end, stats, streamSeconds, paused, pausedLater, fast };
  };
  let run = await runStream();
  figures.stream = [{ rate: 100, seconds: run.streamSeconds, ...run.stats }];
  if (!run.fast) {
    console.log('a speed bound was missed: the stream runs once more');
    run = await runStream();
    figures.stream.push({ rate: 100, seconds: run.streamSeconds, ...run.stats });
  }
  const { mid, end, stats, streamSeconds, paused, pausedLater } = run;
  check(stats.requests >= 0.85 * 100 * streamSeconds, `the stream sends ~100 req/s (${stats.requests} in ${streamSeconds.toFixed(1)} s)`);
  check(stats.decided >= stats.requests - 100, `decisions keep up with the stream (${stats.decided} of ${stats.requests})`);
  for (const l of LANES) {
    check(end[l].a + end[l].b > mid[l].a + mid[l].b && end[l].b > 0 && end[l].a > 0,
      `${l}: the lane grows during the stream (${mid[l].a + mid[l].b} → ${end[l].a + end[l].b}; ${end[l].a} allowed, ${end[l].b} blocked)`);
  }
  check(stats.frameGapP95 < 100, `responsive at 100 req/s: frame gap p95 ${stats.frameGapP95.toFixed(1)} ms < 100 ms`);
  check(stats.lagP95 < 100, `responsive at 100 req/s: event-loop lag p95 ${stats.lagP95.toFixed(1)} ms < 100 ms`);
  check(pausedLater.requests === paused.requests, 'Pause stops the stream');
  await page.screenshot({ path: path.join(artifacts, 'playground-stream.png'), fullPage: true });

  // A readable picture for the docs: a short stream, then a burst, under 5 per 10 seconds.
  await page.click('#reset');
  await page.fill('#limit', '5 per 10 seconds');
  await page.fill('#burst', '5');
  await page.fill('#conc-ttl', '10');  // the page's defaults: 3 concurrent for 10 s, requests of 2 s
  await page.fill('#conc-dur', '2');
  await page.click('#apply');
  await page.fill('#rate', '2');
  await page.click('#stream');
  await page.waitForTimeout(6000);
  await page.fill('#burst-n', '8');
  await page.click('#burst-send');
  await page.waitForTimeout(5000);
  await page.click('#stream');
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(artifacts, 'playground.png'), fullPage: true });

  // ---- a trace file ------------------------------------------------------------------------------
  // 500 requests of key a (5 a second for 100 s) and 100 of key b (1 a second) against 5 per 10 s:
  // more than the plot has room for one by one, so every lane draws bars per column, and the seeds'
  // pictures for key a (the busiest): bands of the fixed windows, the moving window's span at each
  // blocked request, the sliding counter's weighted previous window, the buckets' level.
  await page.goto(`${base}/`, { waitUntil: 'load' });
  await until('the lanes described (file)', () => page.$eval('[data-lane="gcra"] .lane-policy', (e) => e.textContent));
  const start = 1795737600;  // seconds since the epoch: clock-aligned windows follow the file's times
  const lines = [];
  for (let i = 0; i < 500; i++) lines.push(JSON.stringify({ t: start + i * 0.2, key: 'a' }));
  // b's requests last 15 s (their own duration): longer than the concurrency lane's lease time to
  // live (the page's 10 s), so their leases free themselves.
  for (let i = 0; i < 100; i++) lines.push(JSON.stringify({ t: start + i + 0.1, key: 'b', duration_ms: 15000 }));
  lines.sort((p, q) => JSON.parse(p).t - JSON.parse(q).t);
  lines.splice(7, 0, 'not a request');
  await page.setInputFiles('#trace-file', { name: 'trace.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(lines.join('\n')) });
  const fileView = await until('the file decided', async () => {
    const v = await page.evaluate((lanes) => Object.fromEntries(lanes.map((l) => {
      const el = document.querySelector(`[data-lane="${l}"]`);
      const d = (c) => el.querySelector(c).getAttribute('d') || '';
      return [l, { n: Number(el.querySelector('.allowed-count').textContent) + Number(el.querySelector('.blocked-count').textContent),
        b: Number(el.querySelector('.blocked-count').textContent), barsA: d('.bars-a').length, barsB: d('.bars-b').length,
        bands: (d('.seeds').match(/Z/g) || []).length, ramps: (d('.seeds').match(/L/g) || []).length,
        steps: (d('path.level').match(/V/g) || []).length, dots: d('.dots-allowed').length }];
    })), LANES);
    return LANES.every((l) => v[l].n === 600) ? v : null;
  });
  const status = await page.$eval('#status', (e) => e.textContent);
  check(/trace\.jsonl: 600 requests from 2 keys/.test(status) && /1 lines skipped \(line 8/.test(status) && /key a/.test(status),
    `the status names the file, the skipped line and the focus key: ${status}`);
  for (const l of LANES) {
    const v = fileView[l];
    check(v.barsA > 0 && v.barsB > 0 && v.dots === 0 && v.b > 0, `${l}: bars per column for 600 requests (${v.n} decided, ${v.b} blocked)`);
    check(v.steps >= 400, `${l}: the level of key a is drawn (${v.steps} steps)`);
  }
  for (const l of ['fixed-window', 'fixed-window-first-hit', 'sliding-window-counter']) {
    check(fileView[l].bands >= 4, `${l}: the windows are drawn as bands (${fileView[l].bands})`);
  }
  check(fileView['sliding-window-counter'].ramps >= 4, `sliding-window-counter: the weighted previous window (${fileView['sliding-window-counter'].ramps} ramps)`);
  check(fileView['moving-window'].bands >= 5 && fileView['moving-window'].ramps === 0, `moving-window: the span at blocked requests (${fileView['moving-window'].bands})`);
  check(fileView['gcra'].bands === 0, 'gcra: no windows drawn for a bucket');
  const concFile = await page.$eval('[data-lane="concurrency"]', (el) => ({
    a: Number(el.querySelector('.allowed-count').textContent), b: Number(el.querySelector('.blocked-count').textContent),
    gone: Number(el.querySelector('.expired-count').textContent),
    steps: (el.querySelector('path.level').getAttribute('d').match(/V/g) || []).length }));
  check(concFile.a + concFile.b === 600 && concFile.b > 0 && concFile.gone > 0 && concFile.steps >= 100,
    `concurrency: the file's 600 requests (${concFile.a} admitted, ${concFile.b} denied, ${concFile.gone} freed at the TTL, ${concFile.steps} steps)`);
  await page.screenshot({ path: path.join(artifacts, 'playground-trace.png'), fullPage: true });
  await page.click('#reset');

  // ---- the live view ------------------------------------------------------------------------------
  await page.goto(`${base}/#live`, { waitUntil: 'load' });
  await until('the live cards', () => page.$('[data-policy="login"] .total-allowed'));
  const liveNumbers = (name) => page.$eval(`[data-policy="${name}"]`, (c) => ({
    allowed: Number(c.querySelector('.total-allowed').textContent),
    denied: Number(c.querySelector('.total-denied').textContent),
    top: [...c.querySelectorAll('tbody td:first-child')].map((td) => td.textContent),
    bars: (c.querySelector('.bar-a') || { getAttribute: () => '' }).getAttribute('d'),
    deniedBars: (c.querySelector('.bar-d') || { getAttribute: () => '' }).getAttribute('d'),
  }));
  const loginBefore = await liveNumbers('login');
  check(loginBefore.allowed === 0 && loginBefore.denied === 0, 'login starts at 0 allowed, 0 denied');
  // 8 requests from one address against 5/hour: 5 allowed, 3 denied; 2 from another: allowed.
  for (let i = 0; i < 8; i++) await hit('login', '203.0.113.9');
  for (let i = 0; i < 2; i++) await hit('login', '198.51.100.7');
  const login = await until('the live counters to move', async () => {
    const n = await liveNumbers('login');
    return n.allowed === 7 && n.denied === 3 ? n : null;
  }, 5000);
  check(login.allowed === 7 && login.denied === 3, `live: login counted 7 allowed, 3 denied`);
  check(login.top[0] === '203.0.113.9', `live: the most-denied key is 203.0.113.9 (${login.top.join(', ')})`);
  // Traffic for a few seconds, so the per-second bars have complete seconds to draw.
  // api allows 20/s per key: users stay under it, crawler-1 (3 per round) and bot-7 (2 per round,
  // about 25 rounds a second) go over.
  const stopAt = Date.now() + 8000;
  let sent = 0;
  while (Date.now() < stopAt) {
    await Promise.all([hit('api', `user-${sent % 7}`), hit('api', 'crawler-1'), hit('api', 'crawler-1'),
      hit('api', 'crawler-1'), hit('api', 'bot-7'), sent % 2 ? hit('api', 'bot-7') : null,
      hit('login', `198.51.100.${sent % 40}`)]);
    sent++;
    await sleep(30);
  }
  const api = await until('the bars', async () => {
    const n = await liveNumbers('api');
    return n.bars && n.deniedBars ? n : null;
  }, 5000);
  check(api.bars.length > 0 && api.deniedBars.length > 0, 'live: the api policy draws allowed and denied bars');
  check(api.top[0] === 'crawler-1', `live: api's most-denied key is crawler-1 (${api.top.join(', ')})`);
  // Every card draws the same span of seconds, and says which.
  const axes = await page.$$eval('article.policy .axis', (es) => es.map((e) => e.textContent));
  check(axes.length >= 2 && axes.every((a) => a === axes[0] && a.endsWith('now')),
    `live: the cards share one time axis (${axes.join(' | ')})`);
  // The RLQS panel: the rule, its limit (600/minute: 10/s) and no client yet.
  const split = await until('the RLQS panel', () => page.$eval('#rlqs', (p) => !p.hidden && [...p.querySelectorAll('tbody tr')]
    .map((tr) => ({ rule: tr.dataset.rule, limit: tr.querySelector('.limit').textContent,
      clients: tr.querySelector('.clients').textContent, assigned: tr.querySelector('.assigned').textContent }))));
  check(split.length === 1 && split[0].rule === 'edge.yaml:3 edge' && split[0].limit === '10' && split[0].clients === '0' &&
    split[0].assigned === '0', `live: the RLQS panel lists the rule with its limit (${JSON.stringify(split)})`);
  await page.waitForTimeout(1200);
  await page.screenshot({ path: path.join(artifacts, 'live.png'), fullPage: true });

  // ---- a narrow screen -----------------------------------------------------------------------------
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 1 });
  const small = await phone.newPage();
  await small.goto(`${base}/`, { waitUntil: 'load' });  // no token yet: the page asks for it
  await until('the admin token form', () => small.$eval('#admin', (e) => !e.hidden));
  check(!small.url().includes('token'), 'the address carries no token');
  // The service answered 401: the page says a token is needed, not that the settings were refused
  // or that the service did not answer.
  const refused = await until('the playground says why', () => small.$eval('#error', (e) => !e.hidden && e.textContent));
  check(refused.includes('needs the admin token') && !refused.includes('rejected') && !refused.includes('did not answer'),
    `without a token the playground says a token is needed ("${refused}")`);
  await small.fill('#admin-token', adminToken);
  await small.click('#admin button');
  await until('the lanes described (narrow)', () => small.$eval('[data-lane="gcra"] .lane-policy', (e) => e.textContent));
  await small.click('#hit');
  await small.waitForTimeout(300);
  const overflow = await small.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 0, `a 390 px screen does not scroll sideways (overflow ${overflow} px)`);
  await small.screenshot({ path: path.join(artifacts, 'playground-narrow.png'), fullPage: true });
  await phone.close();

  // ---- a service with no admin token: the form says so and offers no field that cannot work ------
  const bareDir = mkdtempSync(path.join(tmpdir(), 'floodgate-browser-bare-'));
  const barePortFile = path.join(bareDir, 'port');
  const bareEnv = { ...process.env };
  delete bareEnv.FLOODGATE_ADMIN_TOKEN;
  const bare = spawn(binary, ['serve', '--listen', '127.0.0.1:0', '--port-file', barePortFile, '--threads', '1',
    '--log-level', 'error'], { stdio: ['ignore', 'inherit', 'inherit'], env: bareEnv });
  try {
    const barePort = await until('the second port file', () => existsSync(barePortFile) && readFileSync(barePortFile, 'utf8').trim());
    const plain = await browser.newPage();
    await plain.goto(`http://127.0.0.1:${barePort}/`, { waitUntil: 'load' });
    await until('the admin form (no token configured)', () => plain.$eval('#admin', (e) => !e.hidden));
    const msg = await plain.$eval('#admin-msg', (e) => e.textContent);
    const fieldHidden = await plain.$eval('#admin-token-field', (e) => e.hidden);
    check(fieldHidden && msg.includes('has none'), `no token configured: no token field, and the page says why ("${msg}")`);
    await plain.close();
  } finally {
    bare.kill('SIGTERM');
    rmSync(bareDir, { recursive: true, force: true });
  }

  check(foreign.length === 0, `nothing is fetched from another origin (${foreign.join(', ') || 'none'})`);
  check(pageErrors.length === 0, `no script errors (${pageErrors.join('; ') || 'none'})`);
} catch (e) {
  failures.push(String(e && e.stack || e));
  console.log(`FAIL ${e && e.stack || e}`);
} finally {
  writeFileSync(path.join(artifacts, 'figures.json'), JSON.stringify(figures, null, 2) + '\n');
  await cleanup();
}
console.log(`screenshots and figures.json in ${artifacts}`);
console.log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
