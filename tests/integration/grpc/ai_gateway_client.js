// Envoy AI Gateway's token budget on a rule Envoy Gateway pushes, on the wire: this script is the
// control plane (an xDS server of @grpc/grpc-js that pushes the RateLimitConfig Envoy Gateway's
// translator makes of a BackendTrafficPolicy rule with two Distinct selectors, x-user-id and
// x-request-id, and a request and a response cost), starts the real binary with an overlay that
// gives the rule a reservation on the x-request-id selector, and plays the two calls Envoy makes
// per request: at the request the estimate (the rule's request cost), when the stream ends the
// usage (its response cost: hits_addend from the dynamic metadata io.envoy.ai_gateway:
// llm_total_token, with apply_on_stream_done). Usage:
//   node ai_gateway_client.js FLOODGATE PROTO_DIR WORK_DIR
// Prints "N passed, M failed"; exits 1 on any failure.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const { grpc, rlsClient, checks } = require('./wire_check');

const [floodgate, protoDir, work] = process.argv.slice(2);
const { check, finish } = checks();
const typeUrl = 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig';

// Envoy Gateway's keys (docs/envoy-gateway.md, section 3): the listener's domain, the route, the
// policy's rule, its selectors in order, the rate on the last.
const domain = 'default/eg/http';
const route = 'httproute/default/backend/rule/0/match/0/*';
const policyRule = 'default/ai-budget/rule/0';
const budget = 5000;  // limit: {requests: 5000, unit: Hour}

function rateLimitConfig() {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => path.join(protoDir, target);
  root.loadSync('ratelimit/config/ratelimit/v3/rls_conf.proto', { keepCase: true });
  const type = root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
  const message = type.fromObject({
    name: domain,
    domain,
    descriptors: [{
      key: route, value: route,
      descriptors: [{
        key: policyRule, value: policyRule,
        descriptors: [{
          key: 'rule-0-match-0',  // x-user-id, Distinct
          descriptors: [{ key: 'rule-0-match-1', rate_limit: { requests_per_unit: budget, unit: 'HOUR' } }],
        }],
      }],
    }],
  });
  return Buffer.from(type.encode(message).finish());
}

// An aggregated discovery server that pushes the rules once per stream and takes the ACKs.
function controlPlane() {
  const definition = protoLoader.loadSync('envoy/service/discovery/v3/ads.proto', {
    includeDirs: [protoDir], keepCase: true, longs: String, enums: String, defaults: true,
  });
  const ads = grpc.loadPackageDefinition(definition).envoy.service.discovery.v3;
  const server = new grpc.Server();
  const acks = [];
  server.addService(ads.AggregatedDiscoveryService.service, {
    StreamAggregatedResources: (stream) => {
      stream.on('data', (request) => {
        if (request.response_nonce === '') {
          stream.write({ version_info: '1', type_url: typeUrl, nonce: 'n1',
                         resources: [{ type_url: typeUrl, value: rateLimitConfig() }] });
        } else {
          acks.push(request);
        }
      });
      stream.on('error', () => {});
      stream.on('end', () => stream.end());
    },
  });
  return new Promise((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
      if (err) reject(err); else resolve({ server, port, acks });
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
let serve = null;  // the binary, stopped before any exit

async function main() {
  const cp = await controlPlane();
  const config = path.join(work, 'floodgate.yaml');
  fs.writeFileSync(config, [
    'rls:',
    '  listen: 127.0.0.1:0',
    `  xds: {server: "127.0.0.1:${cp.port}", node_id: envoy-ratelimit}`,
    '  overlays:',
    '    - match: {policy: default/ai-budget, rule: 0}',
    '      reservation: {id_key: rule-0-match-1, ttl_ms: 600000}',
    '',
  ].join('\n'));
  const portFile = path.join(work, 'grpc.port');
  const log = fs.openSync(path.join(work, 'serve.log'), 'w');
  serve = spawn(floodgate, ['serve', '--config', config, '--listen', '127.0.0.1:0', '--threads', '2',
                                  '--grpc-port-file', portFile], { stdio: ['ignore', log, log] });
  let grpcPort = '';
  for (let i = 0; i < 200 && grpcPort === ''; i++) {
    await sleep(50);
    if (fs.existsSync(portFile)) grpcPort = fs.readFileSync(portFile, 'utf8').trim();
  }
  check(grpcPort !== '', 'floodgate serves once the rules came over xDS');
  if (grpcPort === '') {
    serve.kill();
    console.log(fs.readFileSync(path.join(work, 'serve.log'), 'utf8'));
    finish();
  }
  check(cp.acks.some((a) => a.version_info === '1' && !a.error_detail), 'the push is ACKed', cp.acks);

  const { client, call } = rlsClient(grpcPort, protoDir);
  const user = `alice-${process.pid}`;
  // What Envoy sends for the rule's rate limits: the same entries at the request and at the
  // stream's end, hits_addend the estimate or the usage.
  const envoyCall = (id, tokens) => ({
    domain,
    descriptors: [{
      entries: [{ key: route, value: route }, { key: policyRule, value: policyRule },
                { key: 'rule-0-match-0', value: user }, { key: 'rule-0-match-1', value: id }],
      hits_addend: { value: tokens },
    }],
  });
  const left = async (id, tokens) => {
    const { err, res } = await call(envoyCall(id, tokens));
    return err ? err.message : `${res.overall_code} ${res.statuses[0].limit_remaining}`;
  };
  // The budget is a window of the clock's hours: the calls start at least three seconds before
  // the hour turns.
  const toHour = 3600000 - (Date.now() % 3600000);
  if (toHour < 3000) await sleep(toHour + 100);
  const steps = [
    ['r1', 2000, 'OK 3000', 'r1 reserves its estimate of 2,000'],
    ['r2', 2000, 'OK 1000', 'r2 reserves beside it'],
    ['r3', 2000, 'OVER_LIMIT 1000', 'r3 does not fit beside the two reservations (nothing reserved)'],
    ['r1', 500, 'OK 2500', "r1's stream ends having used 500: 1,500 refunded"],
    ['r3', 2000, 'OK 500', 'r3 sent again fits now'],
    ['r2', 2600, 'OK 0', "r2 ends having used 2,600, more than its estimate: the budget owes 100"],
    ['r3', 100, 'OK 1800', "r3 ends having used 100"],
    ['r1', 4000, 'OK 1800', 'a second stream-done call of r1 changes nothing'],
  ];
  for (const [id, tokens, expected, what] of steps) {
    const got = await left(id, tokens);
    check(got === expected, what, { expected, got });
  }
  client.close();
  serve.kill();
  cp.server.forceShutdown();
  finish();
}

main().catch((e) => {
  if (serve !== null) serve.kill();
  console.log(`FAIL: ${e.stack}`);
  process.exit(1);
});
