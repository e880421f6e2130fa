// A KServe v2 client that chronoserve did not write: @grpc/grpc-js, with the service definition
// discovered at run time through gRPC server reflection (grpc-js-reflection-client) — no .proto
// file from this repository is read. Usage: node client.js HOST:PORT [MODEL] [--model-control]
// MODEL is the example MLP (FP32 INPUT__0 [-1,64] -> OUTPUT__0 [-1,16]). --model-control (a server in
// --model-control-mode explicit): also unloads MODEL, checks it is refused, and loads it again.
// Prints one line per check and ends with "N passed, N failed"; exits 1 on any failure.
'use strict';

const crypto = require('crypto');
const grpc = require('@grpc/grpc-js');
const { GrpcReflection } = require('grpc-js-reflection-client');

const SERVICE = 'inference.GRPCInferenceService';
const address = process.argv[2];
const model = process.argv[3] || 'mlp';
const modelControl = process.argv.includes('--model-control');
let passed = 0;
let failed = 0;

function check(name, condition, detail) {
  if (condition) {
    passed += 1;
    console.log(`ok - ${name}`);
  } else {
    failed += 1;
    console.log(`not ok - ${name}${detail !== undefined ? ': ' + JSON.stringify(detail) : ''}`);
  }
}

function call(stub, method, request) {
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + 20000);
    stub[method](request, { deadline }, (err, response) => resolve({ err, response }));
  });
}

// Random finite FP32 values in [-1, 1) (never all zero), little-endian bytes.
function randomFp32(count) {
  const values = new Float32Array(count);
  const bytes = crypto.randomBytes(count * 4);
  for (let i = 0; i < count; i += 1) values[i] = bytes.readUInt32LE(i * 4) / 2 ** 31 - 1;
  return Buffer.from(values.buffer);
}

// protobuf maps arrive as an object, or (descriptors rebuilt from reflection) as key/value entries.
function parameterMap(parameters) {
  if (!Array.isArray(parameters)) return parameters || {};
  return Object.fromEntries(parameters.map((entry) => [entry.key, entry.value]));
}

async function discover() {
  const reflection = new GrpcReflection(address, grpc.credentials.createInsecure());
  const services = await reflection.listServices();
  check('reflection lists ' + SERVICE, services.includes(SERVICE), services);
  const descriptor = await reflection.getDescriptorBySymbol(SERVICE);
  const pkg = descriptor.getPackageObject({ keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  return new pkg.inference.GRPCInferenceService(address, grpc.credentials.createInsecure());
}

async function checkHealthAndMetadata(stub) {
  const live = await call(stub, 'ServerLive', {});
  check('ServerLive', !live.err && live.response.live === true, live.err || live.response);
  const ready = await call(stub, 'ServerReady', {});
  check('ServerReady', !ready.err && ready.response.ready === true, ready.err || ready.response);
  const meta = await call(stub, 'ModelMetadata', { name: model });
  check('ModelMetadata', !meta.err, meta.err && meta.err.details);
  if (meta.err) return;
  const input = meta.response.inputs[0];
  check('ModelMetadata input', input.name === 'INPUT__0' && input.datatype === 'FP32' &&
        input.shape.join(',') === '-1,64', input);
  check('ModelMetadata output', meta.response.outputs[0].shape.join(',') === '-1,16', meta.response.outputs);
}

// Triton's ModelConfig, as perf_analyzer and tritonclient call it at start-up. The descriptors come
// from the server's reflection, i.e. from chronoserve's own protos: this proves the call works over
// the wire with what the server declares, not that the field numbers are Triton's (the C++
// ModelConfigWireTest checks those).
async function checkModelConfig(stub) {
  const { err, response } = await call(stub, 'ModelConfig', { name: model });
  check('ModelConfig', !err, err && err.details);
  if (err) return;
  const config = response.config || {};
  check('ModelConfig name and platform', config.name === model && config.platform === 'pytorch_libtorch', config);
  check('ModelConfig max_batch_size', Number.isInteger(config.max_batch_size) && config.max_batch_size > 0,
        config.max_batch_size);
  const input = (config.input || [])[0];
  check('ModelConfig input', input && input.name === 'INPUT__0' && input.data_type === 'TYPE_FP32' &&
        input.dims.join(',') === '64', input);
  const output = (config.output || [])[0];
  check('ModelConfig output', output && output.name === 'OUTPUT__0' && output.dims.join(',') === '16', output);
  const missing = await call(stub, 'ModelConfig', { name: 'no_such_model' });
  check('ModelConfig of an unknown model is NOT_FOUND',
        missing.err && missing.err.code === grpc.status.NOT_FOUND && /no_such_model/.test(missing.err.details),
        missing.err && { code: missing.err.code, details: missing.err.details });
}

async function checkInfer(stub) {
  const batch = 3;
  const request = {
    model_name: model,
    id: 'external-node-1',
    inputs: [{ name: 'INPUT__0', datatype: 'FP32', shape: [batch, 64] }],
    raw_input_contents: [randomFp32(batch * 64)],
  };
  const { err, response } = await call(stub, 'ModelInfer', request);
  check('ModelInfer', !err, err && err.details);
  if (err) return;
  check('ModelInfer id echoed', response.id === 'external-node-1', response.id);
  const out = response.outputs[0];
  check('ModelInfer output shape', out && out.name === 'OUTPUT__0' && out.datatype === 'FP32' &&
        out.shape.join(',') === `${batch},16`, out);
  const raw = response.raw_output_contents[0];
  check('ModelInfer output bytes', raw && raw.length === batch * 16 * 4, raw && raw.length);
  const values = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
  check('ModelInfer outputs finite', values.every(Number.isFinite));
  const params = parameterMap(response.parameters);
  const total = params['timing.server_total_ns'];
  check('timing.server_total_ns present', total !== undefined && total.parameter_choice === 'int64_param' &&
        Number(total.int64_param) > 0, total);
  // The host spans follow the request without a gap: with the device spans they fit in server_total.
  const ns = key => (params[key] && params[key].parameter_choice === 'int64_param' ? Number(params[key].int64_param) : NaN);
  const parts = ['admit', 'queue', 'input_stage', 'h2d', 'compute', 'd2h', 'output_stage', 'handback'].map(k => ns(`timing.${k}_ns`));
  check('timing.admit_ns and timing.handback_ns present', ns('timing.admit_ns') > 0 && ns('timing.handback_ns') >= 0,
        [params['timing.admit_ns'], params['timing.handback_ns']]);
  check('every span fits in server_total', parts.every(v => v >= 0) &&
        parts.reduce((a, v) => a + v, 0) <= Number(total && total.int64_param), parts);
}

async function checkInvalidArgument(stub) {
  const request = {
    model_name: model,
    inputs: [{ name: 'INPUT__0', datatype: 'FP32', shape: [2, 63] }],
    raw_input_contents: [randomFp32(2 * 63)],
  };
  const { err } = await call(stub, 'ModelInfer', request);
  check('wrong shape is INVALID_ARGUMENT', err && err.code === grpc.status.INVALID_ARGUMENT, err && err.code);
  check('error names the tensor', err && /INPUT__0/.test(err.details), err && err.details);
}

// Triton's model control, as tritonclient's unload_model / load_model / get_model_repository_index.
async function checkModelControl(stub) {
  const unload = await call(stub, 'RepositoryModelUnload', { model_name: model });
  check('RepositoryModelUnload', !unload.err, unload.err && unload.err.details);
  const notReady = await call(stub, 'ModelReady', { name: model });
  check('ModelReady false once unloaded', !notReady.err && notReady.response.ready === false,
        notReady.err || notReady.response);
  const refused = await call(stub, 'ModelInfer', {
    model_name: model,
    inputs: [{ name: 'INPUT__0', datatype: 'FP32', shape: [1, 64] }],
    raw_input_contents: [randomFp32(64)],
  });
  check('ModelInfer of an unloaded model is NOT_FOUND saying so',
        refused.err && refused.err.code === grpc.status.NOT_FOUND && /unloaded/.test(refused.err.details),
        refused.err && { code: refused.err.code, details: refused.err.details });
  const index = await call(stub, 'RepositoryIndex', {});
  const entry = !index.err && index.response.models.find((m) => m.name === model);
  check('RepositoryIndex lists it UNAVAILABLE', entry && entry.state === 'UNAVAILABLE', index.err || index.response);
  const load = await call(stub, 'RepositoryModelLoad', { model_name: model });
  check('RepositoryModelLoad', !load.err, load.err && load.err.details);
  const ready = await call(stub, 'ModelReady', { name: model });
  check('ModelReady true once loaded', !ready.err && ready.response.ready === true, ready.err || ready.response);
  // Triton's 'config' load parameter: the model configuration as JSON, in place of config.pbtxt.
  const config = {
    max_batch_size: 2,
    input: [{ name: 'INPUT__0', data_type: 'TYPE_FP32', dims: [64] }],
    output: [{ name: 'OUTPUT__0', data_type: 'TYPE_FP32', dims: [16] }],
    instance_group: [{ kind: 'KIND_CPU' }],
  };
  const withConfig = await call(stub, 'RepositoryModelLoad', {
    model_name: model,
    parameters: [{ key: 'config', value: { string_param: JSON.stringify(config) } }],  // a map, as reflection's descriptors give it
  });
  check('RepositoryModelLoad with a config', !withConfig.err, withConfig.err && withConfig.err.details);
  const served = await call(stub, 'ModelConfig', { name: model });
  check('ModelConfig reports the config loaded', !served.err && Number(served.response.config.max_batch_size) === 2,
        served.err || served.response.config.max_batch_size);
  const typo = await call(stub, 'RepositoryModelLoad', {
    model_name: model,
    parameters: [{ key: 'config', value: { string_param: JSON.stringify({ ...config, max_batch: 4 }) } }],
  });
  check('a config with an unknown key is INVALID_ARGUMENT naming it',
        typo.err && typo.err.code === grpc.status.INVALID_ARGUMENT && /unknown field 'max_batch'/.test(typo.err.details),
        typo.err && { code: typo.err.code, details: typo.err.details });
  const file = await call(stub, 'RepositoryModelLoad', {
    model_name: model,
    parameters: [{ key: 'file:1/model.pt', value: { bytes_param: Buffer.from('x') } }],
  });
  check('a file: override is INVALID_ARGUMENT', file.err && file.err.code === grpc.status.INVALID_ARGUMENT,
        file.err && { code: file.err.code, details: file.err.details });
  const again = await call(stub, 'RepositoryModelLoad', { model_name: model });
  check('RepositoryModelLoad without a config reads config.pbtxt again', !again.err, again.err && again.err.details);
}

async function main() {
  if (!address) {
    console.error('usage: node client.js HOST:PORT [MODEL]');
    process.exit(2);
  }
  try {
    const stub = await discover();
    await checkHealthAndMetadata(stub);
    await checkModelConfig(stub);
    await checkInfer(stub);
    await checkInvalidArgument(stub);
    if (modelControl) {
      await checkModelControl(stub);
      await checkInfer(stub);  // served again
    }
    stub.close();
  } catch (e) {
    check('no exception', false, String(e && e.stack ? e.stack : e));
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

main();
