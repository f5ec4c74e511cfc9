// The standard gRPC health service on floodgate's gRPC port, called by a client nobody here wrote
// (@grpc/grpc-js): Check of the server ("") and of the rate-limit service answers SERVING, an
// unknown service NOT_FOUND; a Watch sees SERVING, then NOT_SERVING once the process is told to
// stop (SIGTERM), before it drains.
//   node health_client.js GRPC_PORT HEALTH_PROTO SERVER_PID
'use strict';
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const [port, protoPath, pid] = process.argv.slice(2);
const def = loader.loadSync(protoPath, { keepCase: true, enums: String, defaults: true });
const Health = grpc.loadPackageDefinition(def).grpc.health.v1.Health;
const client = new Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure());

let passed = 0;
let failed = 0;
function check(what, ok, detail) {
  if (ok) { passed++; console.log(`ok: ${what}`); } else { failed++; console.log(`FAIL: ${what}: ${detail}`); }
}
const call = (service) => new Promise((resolve) => {
  client.Check({ service }, { deadline: Date.now() + 5000 }, (err, res) => resolve({ err, res }));
});

(async () => {
  try {
    const overall = await call('');
    check('Check("") is SERVING', !overall.err && overall.res.status === 'SERVING', JSON.stringify(overall));
    const rls = await call('envoy.service.ratelimit.v3.RateLimitService');
    check('Check(the rate-limit service) is SERVING', !rls.err && rls.res.status === 'SERVING', JSON.stringify(rls));
    const unknown = await call('no.such.Service');
    check('Check(an unknown service) is NOT_FOUND', unknown.err && unknown.err.code === grpc.status.NOT_FOUND,
      JSON.stringify(unknown.err && unknown.err.code));
    const seen = await new Promise((resolve) => {
      const statuses = [];
      const stream = client.Watch({ service: '' });
      const timer = setTimeout(() => { stream.cancel(); resolve(statuses); }, 8000);
      stream.on('data', (m) => {
        statuses.push(m.status);
        if (m.status === 'SERVING' && statuses.length === 1) process.kill(Number(pid), 'SIGTERM');
        if (m.status === 'NOT_SERVING') { clearTimeout(timer); stream.cancel(); resolve(statuses); }
      });
      stream.on('error', () => { clearTimeout(timer); resolve(statuses); });
    });
    check('Watch: SERVING, then NOT_SERVING after SIGTERM', seen[0] === 'SERVING' && seen.includes('NOT_SERVING'),
      JSON.stringify(seen));
  } catch (e) {
    check('no exception', false, String(e && e.stack || e));
  }
  client.close();
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
})();
