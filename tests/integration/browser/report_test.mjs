// `floodgate simulate --out report.html` on a 1,000,000-request access log, opened in Debian's
// chromium (playwright-core): the report renders, its chart has a row per (limit, strategy) with
// bars, the tables are filled, nothing is fetched, it is under 1 MB and loads in under 1 s
// (median of five loads).
//   node report_test.mjs /path/to/floodgate ARTIFACT_DIR /path/to/make_log.py
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [binary, artifacts, makeLog] = process.argv.slice(2);
if (!binary || !artifacts || !makeLog) {
  console.error('usage: node report_test.mjs FLOODGATE_BINARY ARTIFACT_DIR MAKE_LOG_PY');
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });
const failures = [];
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}
function run(cmd, args) {
  const t0 = Date.now();
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr || r.error}`);
  return { out: r.stdout, ms: Date.now() - t0 };
}

const dir = mkdtempSync(path.join(tmpdir(), 'floodgate-report-'));
const log = path.join(dir, 'access.log');
const report = path.join(dir, 'report.html');
const LAYOUT = '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_api_key"';
let browser;
try {
  const gen = run('python3', [makeLog, '1000000', log, '--users', '5000']);
  console.log(`wrote a 1,000,000-line log in ${gen.ms} ms`);
  // Two limits × two strategies: four rows (the ASan build of the test suite takes ~1 µs a decision).
  const sim = run(binary, ['simulate', '--limit', '1/second', '--limit', '30/minute', '--strategies', 'gcra,fixed-window',
    '--traffic', log, '--log-format', LAYOUT, '--key', 'ip/64', '--out', report]);
  console.log(`simulate: ${sim.ms} ms\n${sim.out}`);
  check(/^1000000 requests over/m.test(sim.out), 'simulate read the 1,000,000 requests');
  const bytes = statSync(report).size;
  check(bytes < 1_000_000, `the report is under 1 MB (${bytes} bytes)`);

  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const foreign = [];
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) foreign.push(r.url()); });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const url = pathToFileURL(report).href;
  const loads = [];
  for (let i = 0; i < 5; i++) {
    const t0 = Date.now();
    await page.goto(`${url}?load=${i}`, { waitUntil: 'load' });
    loads.push({ wall: Date.now() - t0, nav: await page.evaluate(() => performance.getEntriesByType('navigation')[0].loadEventEnd) });
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const wall = median(loads.map((l) => l.wall));
  console.log(`loads: ${JSON.stringify(loads)}`);
  check(wall < 1000, `the report loads in < 1 s (median of 5: ${wall} ms)`);
  const shape = await page.evaluate(() => {
    const chart = document.querySelector('#chart svg.bins-chart');
    const box = chart ? chart.getBoundingClientRect() : { width: 0, height: 0 };
    return {
      rows: chart ? chart.querySelectorAll('g.lane').length : 0,
      withBars: chart ? [...chart.querySelectorAll('g.lane')].filter((g) => (g.querySelector('.bins-allowed')?.getAttribute('d') || '').length > 100).length : 0,
      withBlocked: chart ? chart.querySelectorAll('.bins-blocked').length : 0,
      width: box.width, height: box.height,
      summary: document.querySelectorAll('#summary tbody tr').length,
      top: document.querySelectorAll('#top-keys tbody tr').length,
      topFirst: document.querySelector('#top-keys tbody td')?.textContent,
      hours: document.querySelectorAll('#hours tbody tr').length,
    };
  });
  console.log(JSON.stringify(shape));
  check(shape.rows === 4 && shape.withBars === 4, `the chart has 4 rows, each with allowed bars (${shape.rows}, ${shape.withBars})`);
  check(shape.withBlocked >= 1, 'blocked bars are drawn');
  check(shape.width > 600 && shape.height > 200, `the chart is drawn at a readable size (${shape.width}×${shape.height})`);
  check(shape.summary === 4 && shape.hours === 4, `a summary row and an hours row per (limit, strategy) (${shape.summary}, ${shape.hours})`);
  check(shape.top >= 1 && shape.topFirst === '198.51.100.66', `the top key is the scraper (${shape.topFirst})`);
  check(foreign.length === 0, `nothing is fetched (${foreign.join(', ') || 'none'})`);
  check(errors.length === 0, `no page errors (${errors.join('; ') || 'none'})`);
  await page.screenshot({ path: path.join(artifacts, 'report.png'), fullPage: true });
} catch (e) {
  failures.push(String(e && e.stack || e));
  console.log(`FAIL ${e && e.stack || e}`);
} finally {
  if (browser) await browser.close().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
console.log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
