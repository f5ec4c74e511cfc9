// docs/openapi.yaml against an OpenAPI 3.1 validator nobody here wrote
// (@seriousme/openapi-schema-validator), then every answer of a run of the real binary against
// the description: the status is one the operation lists, the content type its, and a JSON body
// valid against its schema (Ajv's JSON Schema 2020-12, the dialect of OpenAPI 3.1).
//   node check.mjs SPEC FLOODGATE
import { spawn } from 'node:child_process';
import { readFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { Validator } from '@seriousme/openapi-schema-validator';
import Ajv2020 from 'ajv/dist/2020.js';
import YAML from 'yaml';

const [specPath, binary] = process.argv.slice(2);
const spec = YAML.parse(readFileSync(specPath, 'utf8'));
const validator = new Validator();
const res = await validator.validate(spec);
if (!res.valid || validator.version !== '3.1') {
  console.error(`FAIL ${specPath}: not a valid OpenAPI 3.1 description (${validator.version})`, JSON.stringify(res.errors, null, 2));
  process.exit(1);
}
const operations = Object.values(spec.paths).reduce((n, p) => n + Object.keys(p).length, 0);
console.log(`${specPath}: valid OpenAPI ${validator.version}, ${Object.keys(spec.paths).length} paths, ${operations} operations`);

const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema({ $id: 'spec', components: spec.components });
const resolve = (x) => {  // a $ref of components/responses, as its object
  if (x && x.$ref) return x.$ref.split('/').slice(1).reduce((o, k) => o[k], spec);
  return x;
};
const schemaOf = (schema) => (schema.$ref ? { $ref: `spec${schema.$ref}` } : JSON.parse(JSON.stringify(schema).replaceAll('"#/components', '"spec#/components')));

const port = await new Promise((ok) => { const s = createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); }); });
const dir = mkdtempSync(join(tmpdir(), 'floodgate-openapi-'));
const config = join(dir, 'floodgate.yaml');
writeFileSync(config, `listen: 127.0.0.1:${port}
storage: memory
policies:
  - {name: api, strategy: fixed-window, limit: 2/hour}
  - {name: plan, strategy: fixed-window, limit: "100/minute; 5000 per calendar month"}
  - {name: slots, strategy: concurrency, limit: 1 concurrent for 1 minute}
  - {name: web, strategy: gcra, limit: 1/hour, key: {query: user}}
`);
const token = 'openapi-check-admin-token';
const server = spawn(binary, ['serve', '--config', config], { env: { ...process.env, FLOODGATE_ADMIN_TOKEN: token }, stdio: 'inherit' });
const base = `http://127.0.0.1:${port}`;
for (let i = 0; ; ++i) {
  try { await fetch(`${base}/healthz`); break; } catch (e) { if (i > 100) throw e; await new Promise((r) => setTimeout(r, 50)); }
}

let failures = 0;
let answers = 0;
const covered = new Set();
async function check(method, path, { body, admin = false, query = '' } = {}) {
  const headers = { 'content-type': 'application/json' };
  if (admin) headers.authorization = `Bearer ${token}`;
  const r = await fetch(`${base}${path}${query}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  const where = `${method} ${path}${query} ${r.status}`;
  const op = spec.paths[path]?.[method.toLowerCase()];
  const response = op && resolve(op.responses[String(r.status)] ?? op.responses.default);
  answers++;
  covered.add(`${method} ${path}`);
  if (!response) { failures++; console.error(`FAIL ${where}: not in the description\n  ${text}`); return; }
  const content = response.content;
  if (!content) return;
  const type = (r.headers.get('content-type') ?? '').split(';')[0];
  if (!content[type]) { failures++; console.error(`FAIL ${where}: content type ${type} not described`); return; }
  if (type !== 'application/json') return;
  const validate = ajv.compile(schemaOf(content[type].schema));
  if (!validate(JSON.parse(text))) {
    failures++;
    console.error(`FAIL ${where}: ${ajv.errorsText(validate.errors)}\n  ${text}`);
  }
}

try {
  const hit = (b) => check('POST', '/v1/hit', { body: b });
  await hit({ policy: 'api', key: 'k' });
  await hit({ policy: 'api', key: 'k' });
  await hit({ policy: 'api', key: 'k' });                                  // 429
  await hit({ policy: 'nope', key: 'k' });                                 // 400
  await hit({ policy: 'plan', key: 'k', cost: 10, reservation: 'r1' });
  await hit({ policy: 'plan', key: 'k', cost: 10, reservation: 'r1' });    // 409
  await hit({ limit: '10/minute', strategy: 'token-bucket', burst: 20, key: 'k' });
  const group = (cost) => check('POST', '/v1/hits', { body: { hits: [{ policy: 'web', key: 'g' }, { policy: 'plan', key: 'g', cost }] } });
  await group(1);
  await group(1);                                                          // 429: web's 1/hour
  await check('POST', '/v1/hits', { body: { hits: [] } });                // 400
  await check('POST', '/v1/test', { body: { policy: 'plan', key: 'k' } });
  await check('POST', '/v1/test', { body: { policy: 'plan' } });          // 400
  for (const actual of [5, 5]) await check('POST', '/v1/settle', { body: { policy: 'plan', key: 'k', reservation: 'r1', actual } });
  await check('POST', '/v1/settle', { body: { policy: 'plan', key: 'k', reservation: 'other', actual: 1 } });
  await check('POST', '/v1/settle', { body: { policy: 'plan', key: 'k', reservation: 'r1' } });  // 400
  await hit({ policy: 'slots', key: 'k', reservation: 'lease-1' });
  await check('POST', '/v1/renew', { body: { policy: 'slots', key: 'k', reservation: 'lease-1' } });
  await check('POST', '/v1/release', { body: { policy: 'slots', key: 'k', reservation: 'lease-1' } });
  await check('POST', '/v1/release', { body: { policy: 'slots', key: 'k', reservation: 'lease-1' } });  // 404
  await check('POST', '/v1/renew', { body: { policy: 'api', key: 'k', reservation: 'x' } });            // 400
  await check('GET', '/v1/stats', { query: '?policy=plan&key=k' });
  await check('GET', '/v1/stats', { query: '?policy=plan' });
  await check('GET', '/v1/auth', { query: '?policy=web&user=u' });
  await check('GET', '/v1/auth', { query: '?policy=web&user=u' });
  await check('GET', '/v1/auth', { query: '?policy=web' });
  await check('DELETE', '/v1/keys', { query: '?policy=api&key=k', admin: true });
  await check('DELETE', '/v1/keys', { query: '?policy=api&key=k' });     // 401
  await check('GET', '/v1/live', { admin: true });
  await check('GET', '/v1/live');
  await check('POST', '/v1/simulate', { admin: true, body: { limit: '2/second', trace: [{ t: 0, key: 'a' }, { t: 0.1, key: 'a' }] } });
  await check('POST', '/v1/simulate', { admin: true, body: {} });
  for (const p of ['/metrics', '/healthz', '/livez', '/healthcheck', '/readyz']) await check('GET', p);
  await check('POST', '/json', { body: { domain: 'd', descriptors: [] } });
} finally {
  server.kill('SIGTERM');
}
const missing = Object.entries(spec.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)).filter((o) => !covered.has(o));
if (missing.length) { failures++; console.error(`FAIL operations never called: ${missing.join(', ')}`); }
console.log(`${answers} answers from ${covered.size} operations checked against the description, ${failures} failures`);
process.exit(failures ? 1 : 0);
