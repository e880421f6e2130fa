// A stand-alone OTLP/gRPC trace receiver for chronoserve's tests, built only from code nobody in
// chronoserve wrote: @grpc/grpc-js for the transport and the protobuf codec that
// @opentelemetry/otlp-transformer ships (build/src/generated/root.js). It decodes every
// ExportTraceServiceRequest and prints one JSON line per span on stdout:
//   {"type":"listening","port":N}            once, after binding
//   {"type":"span", "traceId": hex, "spanId": hex, "parentSpanId": hex|"", "name", "kind",
//    "startNs": "decimal", "endNs": "decimal", "attributes": {k: v}, "links": [...],
//    "resource": {k: v}, "scope": name, "status": code, "flags": n}
//   {"type":"export","spans":N,"answered":"OK"|code,"metadata":{k: v}}  after each call (metadata:
//    the call's request headers, the custom ones and gRPC's own such as user-agent)
// Usage: node receiver.js [--port N] [--fail-first N --fail-code CODE] [--reject N]
// With --fail-first, the first N Export calls are answered with gRPC status CODE (e.g. 14).
// With --reject, calls answered OK carry partial_success: min(N, spans in the call) rejected spans
// and the error_message "test receiver: rejecting on purpose".
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const root = require(path.join(
    path.dirname(require.resolve('@opentelemetry/otlp-transformer/package.json')),
    'build/src/generated/root.js'));

const v1 = root.opentelemetry.proto.collector.trace.v1;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(arg('--port', '0'));
let failFirst = Number(arg('--fail-first', '0'));
const failCode = Number(arg('--fail-code', String(grpc.status.UNAVAILABLE)));
const reject = Number(arg('--reject', '0'));

function hex(bytes) {
  return bytes ? Buffer.from(bytes).toString('hex') : '';
}

function anyValue(v) {
  if (v === null || v === undefined) return null;
  switch (v.value) {
    case 'stringValue': return v.stringValue;
    case 'boolValue': return v.boolValue;
    case 'intValue': return String(v.intValue);  // int64 as a decimal string, exact
    case 'doubleValue': return v.doubleValue;
    case 'bytesValue': return hex(v.bytesValue);
    case 'arrayValue': return (v.arrayValue.values || []).map(anyValue);
    case 'kvlistValue': return keyValues(v.kvlistValue.values);
    default: return null;
  }
}

function keyValues(list) {
  const out = {};
  for (const kv of list || []) out[kv.key] = anyValue(kv.value);
  return out;
}

function print(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function metadataOf(call) {
  const out = {};
  for (const [k, v] of Object.entries(call.metadata.getMap())) out[k] = Buffer.isBuffer(v) ? v.toString('hex') : v;
  return out;
}

function exportHandler(call, callback) {
  const request = call.request;
  const metadata = metadataOf(call);
  let count = 0;
  for (const rs of request.resourceSpans || []) {
    const resource = keyValues(rs.resource ? rs.resource.attributes : []);
    for (const ss of rs.scopeSpans || []) {
      const scope = ss.scope ? ss.scope.name : '';
      for (const s of ss.spans || []) {
        ++count;
        print({
          type: 'span',
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          traceState: s.traceState || '',
          name: s.name,
          kind: s.kind,
          flags: s.flags || 0,
          startNs: String(s.startTimeUnixNano),
          endNs: String(s.endTimeUnixNano),
          attributes: keyValues(s.attributes),
          links: (s.links || []).map((l) => ({
            traceId: hex(l.traceId), spanId: hex(l.spanId), attributes: keyValues(l.attributes)})),
          status: s.status ? (s.status.code || 0) : 0,
          resource,
          scope,
        });
      }
    }
  }
  if (failFirst > 0) {
    --failFirst;
    print({type: 'export', spans: count, answered: failCode, metadata});
    callback({code: failCode, details: 'test receiver: failing on purpose'});
    return;
  }
  print({type: 'export', spans: count, answered: 'OK', metadata});
  if (reject > 0) {
    callback(null, v1.ExportTraceServiceResponse.create({partialSuccess: {
      rejectedSpans: Math.min(reject, count), errorMessage: 'test receiver: rejecting on purpose'}}));
    return;
  }
  callback(null, v1.ExportTraceServiceResponse.create({}));
}

const service = {
  Export: {
    path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
    requestStream: false,
    responseStream: false,
    requestSerialize: (m) => Buffer.from(v1.ExportTraceServiceRequest.encode(m).finish()),
    requestDeserialize: (b) => v1.ExportTraceServiceRequest.decode(b),
    responseSerialize: (m) => Buffer.from(v1.ExportTraceServiceResponse.encode(m).finish()),
    responseDeserialize: (b) => v1.ExportTraceServiceResponse.decode(b),
  },
};

const server = new grpc.Server();
server.addService(service, {Export: exportHandler});
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => {
  if (err) {
    process.stderr.write(`receiver: cannot bind: ${err.message}\n`);
    process.exit(2);
  }
  print({type: 'listening', port: bound});
});

// The test closes our stdin when it is done; exit then (and on SIGTERM) so no receiver outlives it.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));
