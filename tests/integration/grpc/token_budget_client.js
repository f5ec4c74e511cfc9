// examples/envoy/token-budget on the wire: @grpc/grpc-js plays the two calls that the example's
// envoy.yaml makes stock Envoy send for each request, against the real binary serving the
// example's own floodgate.yaml and rules/. Usage:
//   node token_budget_client.js GRPC_PORT PROTO_DIR
// At the request's start: one call of two descriptors, the user's budget with the estimate as
// its hits_addend (x-token-estimate) and the user's slot, both with the request's id; at the end
// of the stream (apply_on_stream_done): the same two with the tokens used, which settles the
// reservation and frees the slot. Prints "N passed, M failed"; exits 1 on any failure.
'use strict';
const { rlsClient, checks } = require('./wire_check');

const [grpcPort, protoDir] = process.argv.slice(2);
const { client, call } = rlsClient(grpcPort, protoDir);
const { check, finish } = checks();

const budget = 100000;  // rules/ai.yaml: 100,000 tokens a minute per user
const user = `alice-${process.pid}`;
// What Envoy sends for one of the example's calls: the user's budget (hits_addend: the estimate
// at the start, the usage at the end) and the user's slot, both carrying x-request-id.
const envoyCall = (id, tokens) => ({
  domain: 'ai',
  descriptors: [
    { entries: [{ key: 'user', value: user }, { key: 'request_id', value: id }], hits_addend: { value: tokens } },
    { entries: [{ key: 'user_inflight', value: user }, { key: 'request_id', value: id }] },
  ],
});

async function main() {
  // The budget is a window of the clock's minutes (envoyproxy's unit: minute): the calls below
  // take well under a second, so they start at least three seconds before the minute turns.
  const left = 60000 - (Date.now() % 60000);
  if (left < 3000) await new Promise((resolve) => setTimeout(resolve, left + 100));
  // Four requests start with the default estimate of 2,000 tokens: each reserves it.
  for (let i = 0; i < 4; i++) {
    const { err, res } = await call(envoyCall(`r${i}`, 2000));
    check(!err && res.overall_code === 'OK', `start ${i}: OK`, err ? err.message : res.overall_code);
    if (err) return;
    check(res.statuses[0].limit_remaining === budget - 2000 * (i + 1), `start ${i}: the estimate is reserved`,
          res.statuses[0]);
  }
  // A fifth in progress is refused by its slot, and reserves nothing from the budget.
  const fifth = await call(envoyCall('r4', 2000));
  check(!fifth.err && fifth.res.overall_code === 'OVER_LIMIT', 'the fifth in progress is OVER_LIMIT',
        fifth.err ? fifth.err.message : fifth.res.overall_code);
  check(!fifth.err && fifth.res.statuses[1].code === 'OVER_LIMIT', 'the slot is what refused it',
        fifth.err ? fifth.err.message : fifth.res.statuses);
  // The first stream ends with 130 tokens used: settled at 130, its slot free again.
  const done = await call(envoyCall('r0', 130));
  check(!done.err && done.res.overall_code === 'OK', 'the stream-done call is OK', done.err ? done.err.message : done.res);
  check(!done.err && done.res.statuses[0].limit_remaining === budget - 3 * 2000 - 130,
        'the budget shows the usage, not the estimate', done.err ? done.err.message : done.res.statuses[0]);
  const next = await call(envoyCall('r5', 2000));
  check(!next.err && next.res.overall_code === 'OK', 'a new request takes the freed slot',
        next.err ? next.err.message : next.res.overall_code);
  check(!next.err && next.res.statuses[0].limit_remaining === budget - 4 * 2000 - 130,
        'the refused fifth reserved nothing', next.err ? next.err.message : next.res.statuses[0]);
  // The second stream ends with 100 tokens; then an estimate beyond the whole budget (a lying
  // header) is refused by the budget, with a slot free, and takes neither.
  const second = await call(envoyCall('r1', 100));
  check(!second.err && second.res.overall_code === 'OK', 'the second stream-done call is OK',
        second.err ? second.err.message : second.res.overall_code);
  const huge = await call(envoyCall('r6', 2 ** 53));
  check(!huge.err && huge.res.overall_code === 'OVER_LIMIT' && huge.res.statuses[0].code === 'OVER_LIMIT',
        'an estimate of 2^53 is refused by the budget', huge.err ? huge.err.message : huge.res.statuses);
  const after = await call(envoyCall('r7', 2000));
  check(!after.err && after.res.overall_code === 'OK', 'the refused estimate took no slot',
        after.err ? after.err.message : after.res.overall_code);
  check(!after.err && after.res.statuses[0].limit_remaining === budget - 4 * 2000 - 230,
        'the refused estimate reserved nothing', after.err ? after.err.message : after.res.statuses[0]);
}

main().then(() => {
  client.close();
  finish();
}).catch((e) => {
  console.log(`FAIL: ${e.stack}`);
  process.exit(1);
});
