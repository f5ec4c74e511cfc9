// What the Node clients of Envoy's rate-limit services share: the RateLimitService's client from our
// .proto files and its call as a promise, the RateLimitQuotaService's package, and the count of
// checks with the exit that follows it.
'use strict';
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function rlsClient(grpcPort, protoDir) {
  const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
    includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true,
  });
  const rls = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3;
  const client = new rls.RateLimitService(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
  const call = (request) => new Promise((resolve) => {
    client.ShouldRateLimit(request, { deadline: Date.now() + 5000 }, (err, res) => resolve({ err, res }));
  });
  return { client, call };
}

// envoy.service.rate_limit_quota.v3 from our .proto files (its RateLimitQuotaService client class).
function rlqsPackage(protoDir) {
  const definition = protoLoader.loadSync('envoy/service/rate_limit_quota/v3/rlqs.proto', {
    includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).envoy.service.rate_limit_quota.v3;
}

// check(ok, what, detail) counts; finish() prints "N passed, M failed" and exits 1 on any failure
// (or when nothing was checked).
function checks() {
  let passed = 0;
  let failed = 0;
  const check = (ok, what, detail) => {
    if (ok) {
      passed++;
    } else {
      failed++;
      console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    }
  };
  const finish = () => {
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed === 0 && passed > 0 ? 0 : 1);
  };
  return { check, finish };
}

module.exports = { grpc, rlsClient, rlqsPackage, checks };
