// Reads header_samples' lines (stdin) and checks every rate-limit header with structured-headers,
// an RFC 8941 parser nobody here wrote: each field parses, every integer fits, remaining never
// exceeds the quota, and Retry-After (whole seconds ≥ 1, only when denied) is no later than t.
// RateLimit has one item per limit of the policy (draft-11 allows several), the most constraining
// first (the one X-RateLimit-* describe).
'use strict';
const sh = require('structured-headers');
const lines = require('fs').readFileSync(0, 'utf8').split('\n').filter((l) => l.length > 0);
let failures = 0;
let checked = 0;
function fail(sample, why) {
  failures++;
  if (failures <= 20) console.error(`FAIL ${sample.policy}: ${why}\n  ${JSON.stringify(sample.headers)}`);
}
for (const line of lines) {
  const sample = JSON.parse(line);
  const h = Object.fromEntries(sample.headers);
  try {
    const policy = sh.parseList(h['RateLimit-Policy']);
    const current = sh.parseList(h['RateLimit']);
    if (current.length !== policy.length) {
      throw new Error(`RateLimit has ${current.length} items for the ${policy.length} limits of RateLimit-Policy`);
    }
    const names = new Set(current.map(([n]) => n));
    if (names.size !== current.length) throw new Error('RateLimit names a limit twice');
    for (const [n, p] of current) {
      const listed = policy.find(([pn]) => pn === n);
      if (!listed) throw new Error(`RateLimit names "${n}", which RateLimit-Policy does not list`);
      if (!Number.isInteger(p.get('r')) || p.get('r') < 0 || p.get('r') > listed[1].get('q')) {
        throw new Error(`"${n}": r=${p.get('r')} is not within 0 and q=${listed[1].get('q')}`);
      }
      if (!Number.isInteger(p.get('t')) || p.get('t') < 0) throw new Error(`"${n}": t is not an integer ≥ 0`);
    }
    const [name, params] = current[0];
    const item = policy.find(([n]) => n === name);
    for (const [, p] of policy) {
      if (!Number.isInteger(p.get('q')) || p.get('q') < 1) throw new Error('q is not a positive integer');
      if (p.has('qu')) {
        // The draft's quota units; a concurrency limit (requests in progress) has no window.
        if (!['requests', 'content-bytes', 'concurrent-requests'].includes(p.get('qu'))) {
          throw new Error(`qu=${p.get('qu')} is not a quota unit of the draft`);
        }
        if (p.get('qu') === 'concurrent-requests' && p.has('w')) throw new Error('w on concurrent-requests');
        if (p.get('qu') === 'concurrent-requests') continue;
      }
      if (!Number.isInteger(p.get('w')) || p.get('w') < 1) throw new Error('w is not a positive integer');
    }
    const r = params.get('r');
    const t = params.get('t');
    if (!Number.isInteger(r) || r < 0 || !Number.isInteger(t) || t < 0) throw new Error('r/t are not integers ≥ 0');
    if (r > item[1].get('q')) throw new Error(`r=${r} exceeds q=${item[1].get('q')}`);
    const limit = sh.parseItem(h['X-RateLimit-Limit'])[0];
    const remaining = sh.parseItem(h['X-RateLimit-Remaining'])[0];
    const reset = sh.parseItem(h['X-RateLimit-Reset'])[0];
    if (limit !== item[1].get('q')) throw new Error('X-RateLimit-Limit differs from q');
    if (remaining !== r || remaining > limit) throw new Error('X-RateLimit-Remaining differs from r or exceeds the limit');
    if (reset !== t) throw new Error('X-RateLimit-Reset differs from t');
    if ('Retry-After' in h) {
      const ra = sh.parseItem(h['Retry-After'])[0];
      if (sample.allowed) throw new Error('Retry-After on an allowed request');
      if (!Number.isInteger(ra) || ra < 1) throw new Error('Retry-After is not whole seconds ≥ 1');
      if (t < ra) throw new Error(`t=${t} is sooner than Retry-After=${ra}`);
    }
    checked++;
  } catch (e) {
    fail(sample, e.message);
  }
}
console.log(`${checked} decisions' headers valid, ${failures} invalid`);
if (failures > 0 || checked < 100) process.exit(1);
