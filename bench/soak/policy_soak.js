// The soak of bench/soak/run.sh (see there). Usage:
//   node policy_soak.js write-rules FILE GENERATION
//   node policy_soak.js run GRPC_PORT HTTP_PORT PROTO_DIR PID RULES_FILE OVERRIDES INLINE RELOADS IDLE_S
'use strict';
const fs = require('fs');
const http = require('http');

const kRules = 50;
// SOAK_UNIT=second makes every state expire within the idle wait, so that the end shows whether an
// idle service gives the memory of expired policies back (default hour: the state stays live).
const kUnit = (process.env.SOAK_UNIT || 'hour').toLowerCase();
const limitOf = (rule, generation) => 1000 + rule * 10 + generation * 1000;  // every limit changes

function writeRules(file, generation) {
  let y = 'domain: soak\ndescriptors:\n';
  for (let r = 0; r < kRules; r++) {
    y += `  - key: r${r}\n    rate_limit: {unit: ${kUnit}, requests_per_unit: ${limitOf(r, generation)}}\n`;
  }
  fs.writeFileSync(`${file}.tmp`, y);
  fs.renameSync(`${file}.tmp`, file);
}

if (process.argv[2] === 'write-rules') {
  writeRules(process.argv[3], Number(process.argv[4]));
  process.exit(0);
}

const [grpcPort, httpPort, protoDir, pid, rulesFile, overrides, inline, reloads, idle] = process.argv.slice(3);
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true,
});
const rls = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3;
const client = new rls.RateLimitService(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });

function rssMb() {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]) / 1024;
}
let peak = 0;
const sampler = setInterval(() => { peak = Math.max(peak, rssMb()); }, 100);

function call(request) {
  return new Promise((resolve, reject) => {
    client.ShouldRateLimit(request, { deadline: Date.now() + 10000 }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}
function hit(body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port: httpPort, path: '/v1/hit', method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 || res.statusCode === 429 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(data);
  });
}

// Runs `count` calls of `one(i)`, `concurrency` at a time; reports every `every`.
async function phase(name, count, concurrency, every, one) {
  const start = Date.now();
  let next = 0;
  let done = 0;
  let mark = { t: start, n: 0 };
  let slowest = 0;  // ms, one call seen by the client (the trims of the housekeeping must not show)
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const t0 = process.hrtime.bigint();
      await one(i);
      slowest = Math.max(slowest, Number(process.hrtime.bigint() - t0) / 1e6);
      done++;
      if (done % every === 0) {
        const now = Date.now();
        const rate = ((done - mark.n) * 1000) / Math.max(1, now - mark.t);
        console.log(`  ${name}: ${done}/${count}  ${rate.toFixed(0)} decisions/s  RSS ${rssMb().toFixed(1)} MB`);
        mark = { t: now, n: done };
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const s = (Date.now() - start) / 1000;
  console.log(`${name}: ${count} in ${s.toFixed(1)} s = ${(count / s).toFixed(0)} decisions/s, ` +
              `slowest call ${slowest.toFixed(1)} ms, RSS ${rssMb().toFixed(1)} MB`);
}

async function reloadAll(n) {
  const start = Date.now();
  let calls = 0;
  for (let g = 1; g <= n; g++) {
    writeRules(rulesFile, g);
    process.kill(Number(pid), 'SIGHUP');
    const want = limitOf(0, g);
    for (;;) {  // until the new rules answer
      const res = await call({ domain: 'soak', descriptors: [{ entries: [{ key: 'r0', value: 'u' }] }] });
      calls++;
      if (res.statuses[0].current_limit && res.statuses[0].current_limit.requests_per_unit === want) break;
      await new Promise((r) => setTimeout(r, 1));
    }
    await Promise.all(Array.from({ length: kRules }, (_, r) =>
      call({ domain: 'soak', descriptors: [{ entries: [{ key: `r${r}`, value: 'u' }] }] })));
    calls += kRules;
    if (g % 100 === 0) {
      const s = (Date.now() - start) / 1000;
      console.log(`  reloads: ${g}/${n}  ${(calls / s).toFixed(0)} decisions/s  RSS ${rssMb().toFixed(1)} MB`);
    }
  }
  const s = (Date.now() - start) / 1000;
  console.log(`reloads: ${n} in ${s.toFixed(1)} s (${calls} calls, ${(calls / s).toFixed(0)} decisions/s), RSS ${rssMb().toFixed(1)} MB`);
}

async function main() {
  await call({ domain: 'soak', descriptors: [{ entries: [{ key: 'r0', value: 'warm' }] }] });
  await hit({ policy: 'api', key: 'warm' });
  const start = rssMb();
  peak = start;
  console.log(`RSS at start: ${start.toFixed(1)} MB`);
  await phase('gRPC distinct overrides', Number(overrides), 64, 10000, (i) => call({
    domain: 'soak',
    descriptors: [{ entries: [{ key: 'r1', value: 'u' }], limit: { requests_per_unit: 1000 + i, unit: kUnit.toUpperCase() } }],
  }));
  await phase('HTTP distinct inline limits', Number(inline), 32, 10000, (i) => hit({ limit: `${1000 + i}/${kUnit}`, key: 'u' }));
  await reloadAll(Number(reloads));
  const beforeIdle = rssMb();
  await new Promise((r) => setTimeout(r, Number(idle) * 1000));
  clearInterval(sampler);
  const end = rssMb();
  console.log(`RSS: start ${start.toFixed(1)} MB, peak ${peak.toFixed(1)} MB (+${(peak - start).toFixed(1)}), ` +
              `after the load ${beforeIdle.toFixed(1)} MB, after ${idle} s idle ${end.toFixed(1)} MB (+${(end - start).toFixed(1)})`);
  // What the service gave back (server::Housekeeping): policies dropped, trims and the longest.
  const metrics = await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: httpPort, path: '/metrics', agent }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve(text));
    }).on('error', reject);
  });
  for (const line of metrics.split('\n')) {
    if (/^floodgate_(memory_trim|policies_dropped|memory_policies_freed)/.test(line)) console.log(line);
  }
  client.close();
  agent.destroy();
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack}`);
  process.exit(1);
});
