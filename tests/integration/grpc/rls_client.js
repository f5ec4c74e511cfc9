// Drives floodgate's envoy.service.ratelimit.v3.RateLimitService with @grpc/grpc-js (a client
// nobody here wrote), from our .proto files. Usage:
//   node rls_client.js GRPC_PORT HTTP_PORT PROTO_DIR
// Prints "N passed, M failed"; exits 1 on any failure.
'use strict';
const http = require('http');
const { grpc, rlsClient, checks } = require('./wire_check');

const [grpcPort, httpPort, protoDir] = process.argv.slice(2);
const { client, call } = rlsClient(grpcPort, protoDir);
const { check, finish } = checks();

// Values of this run's own, so that runs against a shared Redis do not meet.
const run = `${process.pid}-${Date.now()}`;
const descriptor = (...pairs) => ({ entries: pairs.map(([key, value]) => ({ key, value })) });
const headers = (res) => Object.fromEntries(res.response_headers_to_add.map((h) => [h.key, h.value]));

async function expectCount(what, request, allowed, limit) {
  for (let i = 0; i < allowed; i++) {
    const { err, res } = await call(request);
    check(!err && res.overall_code === 'OK', `${what}: request ${i + 1} is OK`, err ? err.message : res.overall_code);
    if (err) return;
    check(res.statuses[0].current_limit.requests_per_unit === limit, `${what}: current_limit`, res.statuses[0]);
  }
  const { err, res } = await call(request);
  check(!err && res.overall_code === 'OVER_LIMIT', `${what}: request ${allowed + 1} is OVER_LIMIT`,
        err ? err.message : res.overall_code);
  return res;
}

async function expectInvalid(what, request) {
  const { err } = await call(request);
  check(err && err.code === grpc.status.INVALID_ARGUMENT, `${what}: INVALID_ARGUMENT`,
        err ? `${err.code} ${err.details}` : 'no error');
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

function postJson(body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: httpPort, path: '/json', method: 'POST',
                               headers: { 'Content-Type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

// envoyproxy/ratelimit's POST /json on the HTTP port: the JSON form of the request, decided on the
// same counters as gRPC (3 over /json, 2 over gRPC, then over limit on both).
async function checkJson() {
  const value = `j-${run}`;
  const body = JSON.stringify({ domain: 'e2e', descriptors: [{ entries: [{ key: 'api_key', value }] }] });
  for (let i = 0; i < 3; i++) {
    const r = await postJson(body);
    const json = r.status === 200 ? JSON.parse(r.text) : {};
    check(r.status === 200 && json.overallCode === 'OK' && json.statuses[0].limitRemaining === 4 - i,
          `/json request ${i + 1} is 200 OK`, r);
    check(r.type === 'application/json', '/json answers application/json', r.type);
  }
  const key = { domain: 'e2e', descriptors: [descriptor(['api_key', value])] };
  await expectCount('api_key after /json', key, 2, 5);
  const over = await postJson(body);
  check(over.status === 429 && JSON.parse(over.text).overallCode === 'OVER_LIMIT', '/json over limit is 429', over);
  const bad = await postJson('{"domain": ');
  check(bad.status === 400, '/json with a body that does not parse is 400', bad);
}

// ---- envoyproxy/ratelimit's quota scenarios (its integration-test/scripts), on the wire ------------
// The calls its Envoy (examples/envoy/proxy.yaml) makes for each request of a script, against its
// rules (rules/rl.yaml, per second here), and the answers that Envoy needs. Each scenario starts
// in a fresh window, as the scripts run a minute apart; its calls take well under a second.
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freshSecond = () => sleep(1000 - (Date.now() % 1000) + 20);
const service = (name, hits) => ({ ...descriptor(['service', name]), ...(hits === undefined ? {} : { hits_addend: { value: hits } }) });
// The dynamic metadata as Envoy reads it: metadata.service_with_quota.name (undefined when absent).
// (google.protobuf.Struct's fields, as protobufjs names them: structValue, stringValue, ….)
function serviceWithQuota(res) {
  const meta = res.dynamic_metadata && res.dynamic_metadata.fields.metadata;
  const swq = meta && meta.structValue.fields.service_with_quota;
  return swq ? swq.structValue.fields.name.stringValue : undefined;
}

// quota.sh: GET /quota sends (service, service_1) and (service, service_2), both quotas; every
// call is debited from both, and the request is refused only when both are used up.
async function quotaScenario() {
  await freshSecond();
  const request = { domain: 'rl', descriptors: [service('service_1'), service('service_2')] };
  const codes = [];
  for (let i = 0; i < 3; i++) {
    const { err, res } = await call(request);
    if (err) { check(false, `quota.sh: request ${i + 1}`, err.message); return; }
    codes.push([res.overall_code, res.statuses[0].code, res.statuses[1].code, serviceWithQuota(res)]);
  }
  check(JSON.stringify(codes) === JSON.stringify([
    ['OK', 'OK', 'OK', 'service_1'],                 // both pass: the first one's metadata
    ['OK', 'OVER_LIMIT', 'OK', 'service_2'],         // service_1 used up: service_2 alone passes
    ['OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT', undefined]]),
  'quota.sh: OK, OK, then OVER_LIMIT once every quota is used up', codes);
  await freshSecond();
  const refreshed = await call(request);
  check(!refreshed.err && refreshed.res.overall_code === 'OK', 'quota.sh: the quotas are back in the next window',
        refreshed.err ? refreshed.err.message : refreshed.res.overall_code);
}

// token-quota.sh: GET /tokenquota checks (service, service_2) with hits_addend 0 at the request,
// and debits 1 in an apply_on_stream_done call when the response ends (its answer is not read).
// The usage is counted even past the limit, so three requests pass and the fourth is refused.
async function tokenQuotaScenario() {
  await freshSecond();
  const check0 = { domain: 'rl', descriptors: [service('service_2', 0)] };
  const done1 = { domain: 'rl', descriptors: [service('service_2', 1)] };
  const answers = [];
  for (let i = 0; i < 4; i++) {
    const { err, res } = await call(check0);
    if (err) { check(false, `token-quota.sh: request ${i + 1}`, err.message); return; }
    answers.push(res.overall_code);
    if (i === 0) {
      // The metadata echoes the descriptor's hitsAddend of 0 (and no request hitsAddend).
      const f = res.dynamic_metadata.fields;
      const d0 = f.descriptors.listValue.values[0].structValue.fields;
      check(d0.hitsAddend && d0.hitsAddend.numberValue === 0 && !f.hitsAddend && f.domain.stringValue === 'rl',
            'token-quota.sh: the metadata echoes hitsAddend 0', f);
    }
    if (res.overall_code === 'OK') {
      const end = await call(done1);
      if (end.err) { check(false, `token-quota.sh: stream end ${i + 1}`, end.err.message); return; }
      if (i === 2) {
        check(end.res.dynamic_metadata.fields.descriptors.listValue.values[0].structValue.fields.hitsAddend.numberValue === 1,
              'token-quota.sh: the stream-end metadata echoes hitsAddend 1', end.res.dynamic_metadata);
      }
    }
  }
  check(JSON.stringify(answers) === JSON.stringify(['OK', 'OK', 'OK', 'OVER_LIMIT']),
        'token-quota.sh: three requests pass, the fourth is refused', answers);
  await freshSecond();
  const refreshed = await call(check0);
  check(!refreshed.err && refreshed.res.overall_code === 'OK', 'token-quota.sh: the quota is back in the next window',
        refreshed.err ? refreshed.err.message : refreshed.res.overall_code);
}

// multiservice-tokenquota.sh: GET /multiservice-tokenquota checks both services with hits_addend
// 0; Envoy routes to the service that the metadata names (service_with_quota.name, the first
// that passes), and at the stream's end debits 1 from the service that served it. service_1
// serves two requests, service_2 three, and the sixth is refused; service_1 serves again in the
// next window.
async function multiserviceTokenQuotaScenario() {
  await freshSecond();
  const check0 = { domain: 'rl', descriptors: [service('service_1', 0), service('service_2', 0)] };
  const served = [];
  for (let i = 0; i < 6; i++) {
    const { err, res } = await call(check0);
    if (err) { check(false, `multiservice-tokenquota.sh: request ${i + 1}`, err.message); return; }
    if (res.overall_code !== 'OK') {
      served.push(res.overall_code);
      continue;
    }
    const name = serviceWithQuota(res);
    served.push(name);
    if (!name) continue;
    const end = await call({ domain: 'rl', descriptors: [service(name, 1)] });
    if (end.err) { check(false, `multiservice-tokenquota.sh: stream end ${i + 1}`, end.err.message); return; }
  }
  check(JSON.stringify(served) === JSON.stringify(
    ['service_1', 'service_1', 'service_2', 'service_2', 'service_2', 'OVER_LIMIT']),
  'multiservice-tokenquota.sh: service_1 twice, service_2 three times, then refused', served);
  await freshSecond();
  const again = await call(check0);
  check(!again.err && again.res.overall_code === 'OK' && serviceWithQuota(again.res) === 'service_1',
        'multiservice-tokenquota.sh: service_1 serves again in the next window', again.err ? again.err.message : again.res);
}

// WEEK, MONTH and YEAR divide time as envoyproxy's do: windows of 7, 30 and 365 days from the
// Unix epoch (a week from Thursday, a month of 30 days), reset at the window's end.
async function longUnitsAsEnvoyproxy() {
  for (const [unit, days] of [['week', 7], ['month', 30], ['year', 365]]) {
    const before = Math.floor(Date.now() / 1000);
    const { err, res } = await call({ domain: 'e2e', descriptors: [descriptor(['span', unit])] });
    const after = Math.ceil(Date.now() / 1000);
    if (err) { check(false, `unit ${unit}`, err.message); continue; }
    const period = days * 86400;
    const reset = Number(res.statuses[0].duration_until_reset.seconds);
    // envoyproxy: period − now mod period, for a now between the two readings.
    check(reset >= period - (after % period) && reset <= period - (before % period) + 1 &&
          res.statuses[0].current_limit.unit === unit.toUpperCase(),
          `unit ${unit}: the window of ${days} days from the epoch`, { reset, before, after, status: res.statuses[0] });
  }
}

async function main() {
  // The rules are clock-aligned per-minute windows and this run takes about a second (more on a
  // loaded machine under ASan): start it well clear of a minute boundary, so that no count
  // straddles a window reset.
  const intoMinute = (Date.now() / 1000) % 60;
  if (intoMinute > 45) await new Promise((r) => setTimeout(r, (60 - intoMinute + 0.1) * 1000));
  // OK, OK, … then OVER_LIMIT at the configured count, with the headers Envoy is to add.
  const key = { domain: 'e2e', descriptors: [descriptor(['api_key', `k-${run}`])] };
  const first = await call(key);
  check(!first.err && first.res.statuses[0].limit_remaining === 4, 'first hit leaves 4 of 5', first.res);
  check(!first.err && headers(first.res)['X-RateLimit-Limit'] === '5', 'X-RateLimit-Limit header', first.res);
  const over = await expectCount('api_key 5/minute', key, 4, 5);
  if (over) {
    const h = headers(over);
    check(h['X-RateLimit-Remaining'] === '0', 'X-RateLimit-Remaining: 0 when over', h);
    check(/^[1-9][0-9]*$/.test(h['Retry-After'] || ''), 'Retry-After when over', h);
    check(/^"e2e\/api_key";r=0;t=[0-9]+$/.test(h['RateLimit'] || ''), 'RateLimit header', h);
    check(over.statuses[0].code === 'OVER_LIMIT' && over.statuses[0].limit_remaining === 0,
          'descriptor status OVER_LIMIT, 0 remaining', over.statuses[0]);
    // A clock-aligned window: the reset is anywhere in (0, 60] s (under 1 s just before a minute).
    const d = over.statuses[0].duration_until_reset;
    const reset = Number(d.seconds) + (d.nanos || 0) / 1e9;
    check(reset > 0 && reset <= 60, 'duration_until_reset within the minute', over.statuses[0]);
    check(!d.nanos, 'duration_until_reset in whole seconds, as envoyproxy/ratelimit', d);
  }

  // The most specific match wins.
  await expectCount('tenant=vip user', { domain: 'e2e', descriptors: [descriptor(['tenant', 'vip'], ['user', `u-${run}`])] }, 8, 8);
  await expectCount('tenant=free user', { domain: 'e2e', descriptors: [descriptor(['tenant', 'free'], ['user', `u-${run}`])] }, 3, 3);

  // Wildcards anywhere; share_threshold: every matching value in one counter.
  const route = (r) => ({ domain: 'e2e', descriptors: [descriptor(['run', run], ['route', r])] });
  for (const r of ['/api/a/v1', '/api/b/v1', '/apiv1']) {
    const { err, res } = await call(route(r));
    check(!err && res.overall_code === 'OK', `shared wildcard: ${r} is OK`, err ? err.message : res.overall_code);
  }
  await expectCount('shared wildcard: the 4th matching route', route('/api/c/v1'), 0, 3);
  await expectCount('nested wildcard svc*ep*rpc', route('svc-a-ep-b-rpc'), 2, 2);
  await expectCount('nested wildcard, another value', route('svcXepYrpc'), 2, 2);

  // Two descriptors: the denied request charges neither.
  const both = { domain: 'e2e', descriptors: [descriptor(['tenant', 'other'], ['user', `b-${run}`]), descriptor(['api_key', `b-${run}`])] };
  const deniedBoth = await expectCount('two descriptors', both, 3, 3);
  if (deniedBoth) {
    check(deniedBoth.statuses[1].code === 'OK' && deniedBoth.statuses[1].limit_remaining === 2,
          'the second descriptor was not charged by the denied request', deniedBoth.statuses[1]);
  }
  await expectCount('api_key after the denied pair', { domain: 'e2e', descriptors: [descriptor(['api_key', `b-${run}`])] }, 2, 5);

  // hits_addend: 5 at once use the whole limit; 0 means 1.
  const addend = { domain: 'e2e', descriptors: [descriptor(['api_key', `h-${run}`])], hits_addend: 5 };
  const five = await call(addend);
  check(!five.err && five.res.overall_code === 'OK' && five.res.statuses[0].limit_remaining === 0, 'hits_addend 5', five.res);
  const zero = await call({ ...addend, hits_addend: 0 });
  check(!zero.err && zero.res.overall_code === 'OVER_LIMIT', 'hits_addend 0 counts as 1', zero.res);

  // A limit override from the request, and an algorithm other than fixed window.
  const overridden = { domain: 'e2e', descriptors: [{ ...descriptor(['api_key', `o-${run}`]), limit: { requests_per_unit: 2, unit: 'HOUR' } }] };
  const o = await expectCount('limit override 2/hour', overridden, 2, 2);
  check(o && o.statuses[0].current_limit.unit === 'HOUR', 'override unit in current_limit', o && o.statuses[0]);
  await expectCount('token bucket burst 4', { domain: 'e2e', descriptors: [descriptor(['bucket', `t-${run}`])] }, 4, 2);

  // Unknown descriptors and domains are not limited.
  const unknown = await call({ domain: 'nowhere', descriptors: [descriptor(['x', 'y'])] });
  check(!unknown.err && unknown.res.overall_code === 'OK' && unknown.res.statuses[0].current_limit === null,
        'unknown domain: OK with no limit', unknown.res);

  // Bad requests.
  await expectInvalid('empty domain', { domain: '', descriptors: [descriptor(['api_key', 'a'])] });
  await expectInvalid('no descriptors', { domain: 'e2e', descriptors: [] });
  await expectInvalid('65 descriptors', { domain: 'e2e', descriptors: Array.from({ length: 65 }, () => descriptor(['api_key', 'a'])) });
  await expectInvalid('17 entries', { domain: 'e2e', descriptors: [descriptor(...Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']))] });
  await expectInvalid('a 1025-byte value', { domain: 'e2e', descriptors: [descriptor(['api_key', 'v'.repeat(1025)])] });
  await expectInvalid('an empty key', { domain: 'e2e', descriptors: [descriptor(['', 'v'])] });

  // Invalid UTF-8 in a string field (protobufjs writes a lone surrogate as the bytes ED A0 80):
  // INVALID_ARGUMENT with a message (it was UNIMPLEMENTED with none), and protobuf's complaint
  // goes through the rate-limited log, which counts what it suppresses.
  for (let i = 0; i < 30; i++) {
    const { err } = await call({ domain: 'e2e', descriptors: [descriptor(['api_key', `bad-\uD800-${i}`])] });
    if (i === 0) {
      check(err && err.code === grpc.status.INVALID_ARGUMENT && /UTF-8/.test(err.details),
            'invalid UTF-8: INVALID_ARGUMENT naming it', err ? `${err.code} ${err.details}` : 'no error');
    }
  }

  // A call whose caller has gone before it is decided costs nothing: 300 calls with a 1 ms
  // deadline, then one that waits. Only calls that were answered (or decided just as the
  // deadline passed) may have been charged; before, 239 of 300 were charged unanswered.
  const gone = { domain: 'e2e', descriptors: [{ ...descriptor(['api_key', `d-${run}`]), limit: { requests_per_unit: 1000, unit: 'HOUR' } }] };
  const answers = await Promise.all(Array.from({ length: 300 }, () => new Promise((resolve) => {
    client.ShouldRateLimit(gone, { deadline: Date.now() + 1 }, (err) => resolve(!err));
  })));
  const answered = answers.filter((ok) => ok).length;
  const after = await call(gone);
  const charged = after.err ? 300 : 1000 - 1 - after.res.statuses[0].limit_remaining;
  check(charged - answered < 100, 'calls past their deadline are not charged', { charged, answered });

  await checkJson();
  await longUnitsAsEnvoyproxy();
  await quotaScenario();
  await tokenQuotaScenario();
  await multiserviceTokenQuotaScenario();

  // Per-rule metrics on /metrics, never per value.
  const metrics = await scrape();
  const suppressed = metrics.match(/^floodgate_library_log_suppressed_total (\d+)$/m);
  check(suppressed && Number(suppressed[1]) >= 10, 'library log lines past the rate are suppressed and counted',
        suppressed && suppressed[0]);
  const abandoned = metrics.match(/^floodgate_rls_abandoned_total (\d+)$/m);
  check(abandoned !== null, 'abandoned calls are counted', abandoned && abandoned[0]);
  const over_limit = metrics.match(/^floodgate_rls_over_limit_total\{domain="e2e",rule="api_key"\} (\d+)$/m);
  check(over_limit && Number(over_limit[1]) >= 3, 'over_limit counted per rule', over_limit && over_limit[0]);
  check(!metrics.includes(run), 'no descriptor value in the metrics');

  client.close();
  finish();
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack}`);
  process.exit(1);
});
