// One ShouldRateLimit call to floodgate over TLS with @grpc/grpc-js. Usage:
//   node tls_client.js GRPC_PORT PROTO_DIR CA_FILE [CLIENT_CERT CLIENT_KEY]
// Prints "ok OVERALL_CODE" and exits 0 when the call is answered, or "refused CODE DETAILS" and
// exits 3 when the connection or the call fails (a handshake the server refuses, a certificate
// the client does not trust).
'use strict';
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const [grpcPort, protoDir, caFile, certFile, keyFile] = process.argv.slice(2);
const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true,
});
const rls = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3;
const credentials = grpc.credentials.createSsl(
  fs.readFileSync(caFile),
  keyFile ? fs.readFileSync(keyFile) : null,
  certFile ? fs.readFileSync(certFile) : null);
// The server's certificate is for localhost and 127.0.0.1: the host name is checked.
const client = new rls.RateLimitService(`localhost:${grpcPort}`, credentials);
const request = {
  domain: 'e2e',
  descriptors: [{ entries: [{ key: 'api_key', value: `tls-${process.pid}-${Date.now()}` }] }],
};
client.ShouldRateLimit(request, { deadline: Date.now() + 5000 }, (err, res) => {
  if (err) {
    console.log(`refused ${err.code} ${err.details}`);
    process.exit(3);
  }
  console.log(`ok ${res.overall_code}`);
  process.exit(res.overall_code === 'OK' ? 0 : 1);
});
