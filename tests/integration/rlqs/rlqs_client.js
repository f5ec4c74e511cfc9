// A fleet of emulated Envoys drives floodgate's envoy.service.rate_limit_quota.v3 service with
// @grpc/grpc-js (a client nobody here wrote), from our .proto files, behaving as Envoy's
// rate_limit_quota filter does: domain on every message, time_elapsed 0 in a new bucket's first
// report and whole seconds after, reports with no bucket, streams reopened after a close.
// Usage: node rlqs_client.js GRPC_PORT HTTP_PORT PROTO_DIR RULES_FILE SERVER_PID
// Prints "N passed, M failed"; exits 1 on any failure.
'use strict';
const { grpc, rlqsPackage, checks } = require('../grpc/wire_check');
const fs = require('fs');
const http = require('http');

const [grpcPort, httpPort, protoDir, rulesFile, serverPid] = process.argv.slice(2);
const rlqs = rlqsPackage(protoDir);
const client = new rlqs.RateLimitQuotaService(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());

const figures = [];
const { check, finish } = checks();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Lets the pushes of a rebalance reach the other streams (a report's answer may come after them).
const settle = () => sleep(100);
const keyOf = (bucket) => JSON.stringify(Object.entries(bucket).sort());

// One emulated Envoy: one stream, the last action per bucket.
class Envoy {
  constructor(domain = 'edge') {
    this.domain = domain;
    this.actions = new Map();
    this.responses = 0;
    this.open();
  }
  open() {
    this.error = null;
    this.ended = false;
    this.stream = client.StreamRateLimitQuotas();
    this.stream.on('data', (res) => {
      for (const a of res.bucket_action) this.actions.set(keyOf(a.bucket_id.bucket), a);
      this.responses++;
    });
    this.stream.on('error', (e) => { this.error = e; });
    this.stream.on('end', () => { this.ended = true; });
  }
  // usages: [{bucket, elapsed, allowed, denied}]; Envoy puts the domain on every message.
  send(usages, domain = this.domain) {
    this.stream.write({
      domain,
      bucket_quota_usages: usages.map((u) => ({
        bucket_id: { bucket: u.bucket },
        time_elapsed: { seconds: u.elapsed || 0, nanos: 0 },
        num_requests_allowed: u.allowed || 0,
        num_requests_denied: u.denied || 0,
      })),
    });
  }
  // Sends and waits for the answer (Envoy's first report of a bucket is answered at once).
  async report(usages) {
    const before = this.responses;
    this.send(usages);
    await until(() => this.responses > before);
  }
  action(bucket) { return this.actions.get(keyOf(bucket)); }
  // requests per second the assignment admits: Infinity for ALLOW_ALL, 0 for DENY_ALL or none.
  rate(bucket) {
    const a = this.action(bucket);
    if (!a || !a.quota_assignment_action) return 0;
    const s = a.quota_assignment_action.rate_limit_strategy;
    if (s.strategy === 'blanket_rule') return s.blanket_rule === 'ALLOW_ALL' ? Infinity : 0;
    const tb = s.token_bucket;
    return tb.tokens_per_fill.value / Number(tb.fill_interval.seconds);
  }
  close() { this.stream.end(); }
}

async function until(pred, ms = 3000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) return false;
    await sleep(5);
  }
  return true;
}

function scrape() {
  return new Promise((resolve, reject) => {
    http.get(`http://127.0.0.1:${httpPort}/metrics`, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}
const metric = (text, name) => {
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
};

const sum = (fleet, bucket) => fleet.reduce((s, e) => s + e.rate(bucket), 0);
const near = (x, want, tol = 1) => Math.abs(x - want) <= tol;

async function blanketRules() {
  const e = new Envoy();
  await e.report([{ bucket: { api: 'admin', tenant: 't' } }, { bucket: { api: 'other' } }]);
  const deny = e.action({ api: 'admin', tenant: 't' });
  const allow = e.action({ api: 'other' });
  check(deny && deny.quota_assignment_action.rate_limit_strategy.blanket_rule === 'DENY_ALL', 'action: deny', deny);
  check(e.rate({ api: 'other' }) === Infinity, 'no rule but the catch-all: ALLOW_ALL, explicit', allow);
  const ttl = allow.quota_assignment_action.assignment_time_to_live;
  check(Number(ttl.seconds) >= 10 && ttl.nanos === 0, 'time to live: whole seconds, at least 2 intervals', ttl);
  const other = new Envoy('no-such-domain');
  await other.report([{ bucket: { api: 'chat', tenant: 'x' } }]);
  check(other.rate({ api: 'chat', tenant: 'x' }) === Infinity, 'a domain without rules: ALLOW_ALL', other.action({ api: 'chat', tenant: 'x' }));
  e.close();
  other.close();
}

async function tokenBucketAndQuirks() {
  const b = { api: 'chat', tenant: 'solo' };
  const e = new Envoy();
  await e.report([{ bucket: b, elapsed: 0, allowed: 1 }]);  // a new bucket: time_elapsed 0
  const a = e.action(b);
  const tb = a && a.quota_assignment_action.rate_limit_strategy.token_bucket;
  check(tb && tb.tokens_per_fill.value === 100 && Number(tb.fill_interval.seconds) === 1 && tb.fill_interval.nanos === 0,
        'one client: the whole rate, fill_interval in whole seconds', a);
  check(tb && tb.max_tokens === 20, 'one client: the whole burst as max_tokens', tb);
  // Envoy's later reports: the domain again, whole seconds, and after an abandon a report of no bucket.
  e.send([]);
  await e.report([{ bucket: b, elapsed: 5, allowed: 500, denied: 500 }]);  // 2x the limit
  check(e.rate(b) === 100 && !e.error, 'domain on every message and an empty report are accepted', e.error && e.error.message);
  figures.push(`one client at 2x demand: assigned ${e.rate(b)}/s of 100/s`);
  await e.report([{ bucket: {}, elapsed: 1, allowed: 1 }, { bucket: b, elapsed: 1, allowed: 100 }]);
  check(!e.error && e.rate(b) === 100, 'an empty bucket_id is ignored, the rest answered');
  e.close();
  // Closed, then reopened at the next report: a new client to the server, answered at once.
  await until(() => e.ended || e.error);
  e.open();
  await e.report([{ bucket: b, elapsed: 5, allowed: 400 }]);
  check(e.rate(b) === 100, 'a reopened stream is answered', e.action(b));
  e.close();
}

async function refusedStream() {
  const e = new Envoy('');
  e.send([{ bucket: { api: 'chat', tenant: 'x' } }], '');
  await until(() => e.error);
  check(e.error && e.error.code === grpc.status.INVALID_ARGUMENT && /domain/.test(e.error.details),
        'a first message without a domain: INVALID_ARGUMENT', e.error && e.error.details);
}

// Three equal clients, then 2× against 0.2×, a demand flip, a client leaving and one falling silent.
async function fairness() {
  const b = { api: 'chat', tenant: 'fair' };
  const fleet = [new Envoy(), new Envoy(), new Envoy()];
  for (const e of fleet) await e.report([{ bucket: b, elapsed: 0, allowed: 1 }]);
  await until(() => fleet.every((e) => e.rate(b) === 33));
  check(fleet.every((e) => e.rate(b) === 33), 'three clients without history: 33 each', fleet.map((e) => e.rate(b)));
  for (const e of fleet) await e.report([{ bucket: b, elapsed: 1, allowed: 33, denied: 47 }]);
  check(fleet.every((e) => e.rate(b) === 33) && sum(fleet, b) <= 100, 'three equal demands: equal shares, kept',
        fleet.map((e) => e.rate(b)));
  figures.push(`three equal (80/s each): ${fleet.map((e) => e.rate(b)).join(' / ')}`);
  // The third leaves (stream closed): the others get its share at once.
  const [x, y, z] = fleet;
  z.close();
  await until(() => x.rate(b) === 50 && y.rate(b) === 50);
  check(x.rate(b) === 50 && y.rate(b) === 50, 'a client leaving gives its share back', [x.rate(b), y.rate(b)]);
  figures.push(`a client of three leaving: the others ${x.rate(b)} / ${y.rate(b)}`);
  // 2× against 0.2× of the limit.
  await x.report([{ bucket: b, elapsed: 1, allowed: 50, denied: 150 }]);
  await settle();
  await y.report([{ bucket: b, elapsed: 1, allowed: 20 }]);
  await settle();
  await until(() => x.rate(b) === 78);
  check(x.rate(b) === 78 && y.rate(b) === 22, '2x vs 0.2x: 78 and 22 (demand 20 + 10% headroom)', [x.rate(b), y.rate(b)]);
  check(sum([x, y], b) <= 100, 'sum of assignments <= limit', sum([x, y], b));
  figures.push(`2x vs 0.2x: ${x.rate(b)} / ${y.rate(b)}`);
  // The flip: x now wants 10/s, y wants 90/s. Counted in reports until it settles.
  let reports = 0;
  for (let round = 0; round < 5 && !(near(x.rate(b), 11) && near(y.rate(b), 89)); round++) {
    await x.report([{ bucket: b, elapsed: 1, allowed: 10 }]);
    await settle();
    await y.report([{ bucket: b, elapsed: 1, allowed: Math.min(90, y.rate(b)), denied: 90 - Math.min(90, y.rate(b)) }]);
    await settle();
    reports++;
    check(sum([x, y], b) <= 100, `flip round ${round}: sum <= limit`, [x.rate(b), y.rate(b)]);
  }
  check(near(x.rate(b), 11) && near(y.rate(b), 89) && reports === 1, 'a demand flip settles within one report of each',
        { x: x.rate(b), y: y.rate(b), reports });
  figures.push(`demand flip 78/22 -> ${x.rate(b)}/${y.rate(b)} after ${reports} report(s) of each`);
  // y falls silent (no report, stream open): after 3 of its 1 s intervals x's report takes it all.
  await sleep(3300);
  await x.report([{ bucket: b, elapsed: 1, allowed: 10, denied: 200 }]);
  check(x.rate(b) === 100, 'a client silent for 3 intervals gives its share back', x.rate(b));
  figures.push(`the other silent for 3.3 intervals: ${x.rate(b)}`);
  x.close();
  y.close();
}

async function flood() {
  const e = new Envoy();
  const usages = [];
  for (let i = 0; i < 2000; i++) usages.push({ bucket: { api: 'chat', tenant: `flood-${i}` }, elapsed: 0, allowed: 1 });
  await e.report(usages);
  check(e.actions.size >= 2000 && !e.error, '2000 new buckets in one report are all answered', e.actions.size);
  const m = await scrape();
  check(metric(m, 'floodgate_rlqs_buckets') >= 2000, 'tracked buckets in /metrics', metric(m, 'floodgate_rlqs_buckets'));
  check(metric(m, 'floodgate_rlqs_reports_total') > 2000, 'reports counted', metric(m, 'floodgate_rlqs_reports_total'));
  e.close();
}

// A changed limit reaches every client at its next report; a bad file is refused.
async function reload() {
  const b = { api: 'chat', tenant: 'reload' };
  const fleet = [new Envoy(), new Envoy()];
  for (const e of fleet) await e.report([{ bucket: b, elapsed: 0, allowed: 1 }]);
  await until(() => fleet.every((e) => e.rate(b) === 50));
  const good = fs.readFileSync(rulesFile, 'utf8');
  fs.writeFileSync(rulesFile, good.replace('limit: 100/second', 'limit: 40/second'));
  process.kill(Number(serverPid), 'SIGHUP');
  await sleep(300);
  await fleet[0].report([{ bucket: b, elapsed: 1, allowed: 50 }]);
  await until(() => fleet[1].rate(b) === 20);
  check(fleet[0].rate(b) === 20 && fleet[1].rate(b) === 20, 'a new limit reaches every client at one report',
        fleet.map((e) => e.rate(b)));
  fs.writeFileSync(rulesFile, good.replace('limit: 100/second', 'limit: 10/fortnight'));
  process.kill(Number(serverPid), 'SIGHUP');
  await sleep(300);
  await fleet[1].report([{ bucket: b, elapsed: 1, allowed: 20 }]);
  check(fleet[1].rate(b) === 20, 'a bad file is refused and the old rules keep serving', fleet[1].rate(b));
  const m = await scrape();
  check(/floodgate_config_reloads_total\{result="failed"\} [1-9]/.test(m), 'the refused reload is counted');
  fs.writeFileSync(rulesFile, good);
  for (const e of fleet) e.close();
}

async function main() {
  await blanketRules();
  await tokenBucketAndQuirks();
  await refusedStream();
  await fairness();
  await flood();
  await reload();
  for (const f of figures) console.log(`figure: ${f}`);
  client.close();
  finish();
}

main().catch((e) => { console.log(`FAIL: ${e.stack}`); process.exit(1); });
