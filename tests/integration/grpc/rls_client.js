// Drives floodgate's envoy.service.ratelimit.v3.RateLimitService with @grpc/grpc-js (a client
// nobody here wrote), from our .proto files. Usage:
//   node rls_client.js GRPC_PORT HTTP_PORT PROTO_DIR
// Prints "N passed, M failed"; exits 1 on any failure.
'use strict';
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const http = require('http');

const [grpcPort, httpPort, protoDir] = process.argv.slice(2);
const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true,
});
const rls = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3;
const client = new rls.RateLimitService(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());

// Values of this run's own, so that runs against a shared Redis do not meet.
const run = `${process.pid}-${Date.now()}`;
let passed = 0;
let failed = 0;
function check(ok, what, detail) {
  if (ok) {
    passed++;
  } else {
    failed++;
    console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
  }
}

function call(request) {
  return new Promise((resolve) => {
    client.ShouldRateLimit(request, { deadline: Date.now() + 5000 }, (err, res) => resolve({ err, res }));
  });
}
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
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack}`);
  process.exit(1);
});
