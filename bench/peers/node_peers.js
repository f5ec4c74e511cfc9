#!/usr/bin/env node
// Decision throughput of npm rate limiters.
//
// usage: node node_peers.js inmem|redis RUN_INDEX
//   env: NODE_DIR (where node_modules lives), BENCH_SECONDS (time cap per measurement),
//        REDIS_PORT (redis mode), NODE_ONLY (comma list of peer names, optional),
//        NODE_REDIS_VARIANTS (comma list of seq,c64,c64ap; redis mode)
//
// One JSON line per measurement on stdout. Every loop is bounded by an op count and a time
// cap (the clock is read every CHECK ops).
//
// Scenarios (as in py_limits.py): keys=1 or 100000 (pre-built key strings, visited in one
// shared random order: visitOrder, the same xorshift32 sequence in every peer's benchmark);
// regime=allow (limit never reached) or deny (1 per hour: only the first decision of each key
// is allowed). In-memory runs make one warm-up pass over the key space first.
'use strict';
const path = require('path');
const { createRequire } = require('module');
const { performance } = require('perf_hooks');

const nodeDir = process.env.NODE_DIR
  || path.join(process.env.PEERS_WORK || path.join(process.env.TMPDIR || '/tmp', 'floodgate-peers'), 'node');
const req = createRequire(path.join(nodeDir, 'package.json'));
const version = (name) => JSON.parse(require('fs').readFileSync(
  path.join(nodeDir, 'node_modules', name, 'package.json'), 'utf8')).version;

const NKEYS = 100000;
const CAP = parseFloat(process.env.BENCH_SECONDS || '2');
const mode = process.argv[2];
const run = parseInt(process.argv[3] || '0', 10);
const only = process.env.NODE_ONLY ? process.env.NODE_ONLY.split(',') : null;
const allKeys = Array.from({ length: NKEYS }, (_, i) => `user:${i}`);

// VISITS keys drawn uniformly from `keys` by xorshift32 (seed 2463534242), as in py_limits.py,
// GuavaBench.java and fg_inmem.cpp; one key: itself.
const VISITS = 1 << 20;
function visitOrder(keys) {
  if (keys.length === 1) return keys;
  const out = new Array(VISITS);
  let x = 2463534242 | 0;
  for (let i = 0; i < VISITS; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    out[i] = keys[(x >>> 0) % keys.length];
  }
  return out;
}

function emit(o) {
  const rec = Object.assign({ bench: mode, lang: 'node', run, node: process.version }, o);
  rec.order = rec.keys > 1 ? 'random' : 'one';
  rec.ops_per_s = Math.round((rec.ops / rec.seconds) * 10) / 10;
  rec.seconds = Math.round(rec.seconds * 1e6) / 1e6;
  // fixed key order for readability
  const order = ['bench', 'peer', 'lang', 'version', 'storage', 'algorithm', 'api', 'keys',
    'regime', 'ops', 'seconds', 'ops_per_s', 'allowed', 'threads', 'concurrency', 'run'];
  const out = {};
  for (const k of order) if (k in rec) out[k] = rec[k];
  Object.assign(out, rec);
  process.stdout.write(JSON.stringify(out) + '\n');
}

// synchronous decision loop
function loopSync(fn, keys, cap, maxOps, check = 4096) {
  const n = keys.length;
  let ops = 0, allowed = 0;
  const t0 = performance.now();
  const deadline = t0 + cap * 1000;
  while (ops < maxOps) {
    for (let j = 0; j < check; j++) {
      if (fn(keys[(ops + j) % n])) allowed++;
    }
    ops += check;
    if (performance.now() > deadline) break;
  }
  return { ops, seconds: (performance.now() - t0) / 1000, allowed };
}

// asynchronous decision loop with `conc` concurrent in-flight calls sharing one op budget
async function loopAsync(fn, keys, cap, maxOps, conc, check = 256) {
  const n = keys.length;
  let ops = 0, allowed = 0, stop = false;
  const t0 = performance.now();
  const deadline = t0 + cap * 1000;
  async function worker() {
    while (!stop && ops < maxOps) {
      const i = ops++;
      if (await fn(keys[i % n])) allowed++;
      if ((i % check) === 0 && performance.now() > deadline) stop = true;
    }
  }
  await Promise.all(Array.from({ length: conc }, worker));
  return { ops, seconds: (performance.now() - t0) / 1000, allowed };
}

const SCEN_INMEM = [[1, 'allow'], [1, 'deny'], [NKEYS, 'allow'], [NKEYS, 'deny']];

async function inmem() {
  const { RateLimiterMemory, RateLimiterRes } = req('rate-limiter-flexible');
  const { TokenBucket, RateLimiter } = req('limiter');
  const Bottleneck = req('bottleneck');
  const want = (p) => !only || only.includes(p);

  // rate-limiter-flexible: RateLimiterMemory (fixed window), promise API
  if (want('rate-limiter-flexible')) {
    for (const [nk, regime] of SCEN_INMEM) {
      const rl = new RateLimiterMemory({ points: regime === 'allow' ? 1e9 : 1, duration: 3600 });
      const fn = async (k) => {
        try { await rl.consume(k, 1); return true; } catch (e) {
          if (e instanceof RateLimiterRes) return false; throw e;
        }
      };
      const keys = allKeys.slice(0, nk);
      await loopAsync(fn, keys, 30, Math.max(nk, 20000), 1);
      const r = await loopAsync(fn, visitOrder(keys), CAP, 50e6, 1);
      emit({ peer: 'rate-limiter-flexible', version: version('rate-limiter-flexible'),
        storage: 'memory', algorithm: 'fixed_window', api: 'await RateLimiterMemory.consume(key)',
        keys: nk, regime, ...r, threads: 1, concurrency: 1 });
    }
  }

  // limiter (jhurliman): TokenBucket and RateLimiter, synchronous tryRemoveTokens
  for (const cls of ['TokenBucket', 'RateLimiter']) {
    if (!want('limiter')) break;
    for (const [nk, regime] of SCEN_INMEM) {
      const make = cls === 'TokenBucket'
        ? () => (regime === 'allow'
          ? new TokenBucket({ bucketSize: 1e12, tokensPerInterval: 1e12, interval: 'second' })
          : new TokenBucket({ bucketSize: 1, tokensPerInterval: 1, interval: 'hour' }))
        : () => (regime === 'allow'
          ? new RateLimiter({ tokensPerInterval: 1e12, interval: 'second' })
          : new RateLimiter({ tokensPerInterval: 1, interval: 'hour' }));
      let fn;
      if (nk === 1) {
        const b = make();
        fn = () => b.tryRemoveTokens(1);
      } else {
        const m = new Map();
        fn = (k) => {
          let b = m.get(k);
          if (b === undefined) { b = make(); m.set(k, b); }
          return b.tryRemoveTokens(1);
        };
      }
      const keys = allKeys.slice(0, nk);
      loopSync(fn, keys, 30, Math.max(nk, 200000), 1000);
      const r = loopSync(fn, visitOrder(keys), CAP, 500e6);
      emit({ peer: 'limiter', version: version('limiter'), storage: 'memory',
        algorithm: cls === 'TokenBucket' ? 'token_bucket' : 'token_bucket+interval_counter',
        api: nk === 1 ? `${cls}.tryRemoveTokens(1)` : `Map.get(key) ?? new ${cls}; .tryRemoveTokens(1)`,
        keys: nk, regime, ...r, threads: 1, concurrency: 1 });
    }
  }

  // bottleneck: a pacer/queue, not an admit/reject limiter; measured = jobs admitted and run
  // per second through schedule() with no limit configured (regime allow, one limiter).
  if (want('bottleneck')) {
    for (const conc of [1, 64]) {
      const b = new Bottleneck({ maxConcurrent: null, minTime: 0 });
      const job = () => true;
      const fn = () => b.schedule(job);
      // each datastore step of Bottleneck yields through setTimeout(0) (>= 1 ms in node),
      // so read the clock often
      await loopAsync(fn, ['k'], 0.3, 20000, conc, 8);
      const r = await loopAsync(fn, ['k'], CAP, 20e6, conc, 8);
      emit({ peer: 'bottleneck', version: version('bottleneck'), storage: 'memory',
        algorithm: 'queue_pacer', api: 'await Bottleneck.schedule(job) (no limits set)',
        keys: 1, regime: 'allow', ...r, threads: 1, concurrency: conc });
      await b.stop({ dropWaitingJobs: false }).catch(() => {});
    }
  }
}

async function redis() {
  const Redis = req('ioredis');
  const { RateLimiterRedis, RateLimiterRes } = req('rate-limiter-flexible');
  const port = parseInt(process.env.REDIS_PORT || '6390', 10);
  const scen = [[1, 'allow'], [NKEYS, 'allow'], [1, 'deny']];
  const allVariants = {
    seq: { conc: 1, autoPipe: false },
    c64: { conc: 64, autoPipe: false },
    c64ap: { conc: 64, autoPipe: true },
  };
  const variants = (process.env.NODE_REDIS_VARIANTS || 'seq,c64,c64ap').split(',')
    .map((v) => allVariants[v]);
  for (const v of variants) {
    const client = new Redis({ host: '127.0.0.1', port, enableAutoPipelining: v.autoPipe,
      maxRetriesPerRequest: 1, lazyConnect: true });
    await client.connect();
    for (const [nk, regime] of scen) {
      await client.flushall();
      const rl = new RateLimiterRedis({ storeClient: client, points: regime === 'allow' ? 1e9 : 1,
        duration: 3600, keyPrefix: 'rlf' });
      const fn = async (k) => {
        try { await rl.consume(k, 1); return true; } catch (e) {
          if (e instanceof RateLimiterRes) return false; throw e;
        }
      };
      const keys = allKeys.slice(0, nk);
      // warm-up on a disjoint key space (loads the Lua script)
      await loopAsync(fn, keys.slice(0, 1000).map((k) => 'warm:' + k), 0.2, 2000, v.conc, 64);
      const r = await loopAsync(fn, visitOrder(keys), CAP, 5e6, v.conc, 64);
      emit({ peer: 'rate-limiter-flexible', version: version('rate-limiter-flexible'),
        storage: 'redis', algorithm: 'fixed_window',
        api: 'await RateLimiterRedis.consume(key) [ioredis ' + version('ioredis')
          + (v.autoPipe ? ', enableAutoPipelining' : '') + ']',
        keys: nk, regime, ...r, threads: 1, concurrency: v.conc,
        client: 'ioredis' + (v.autoPipe ? '+autopipeline' : '') });
    }
    await client.flushall();
    client.disconnect();
  }
}

(mode === 'inmem' ? inmem() : redis()).then(() => process.exit(0), (e) => {
  console.error(e); process.exit(1);
});
