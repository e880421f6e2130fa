#!/usr/bin/env python3
"""An independent KServe v2 client: Python grpcio with message classes built at run time from a
descriptor set (protoc --descriptor_set_out of proto/inference.proto), no generated code of ours.
Closed loop, concurrency 1: prints p50/p99 of end-to-end and of e2e - timing.server_total_ns.

  python_client_probe.py DESCRIPTOR_SET HOST:PORT MODEL BATCH REQUESTS [JSON_OUT]
"""
import json
import statistics
import sys
import time

import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def main():
    descriptor_set, address, model, batch, requests = sys.argv[1:6]
    batch, requests = int(batch), int(requests)
    files = descriptor_pb2.FileDescriptorSet()
    with open(descriptor_set, "rb") as f:
        files.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    cls = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    Request, Response = cls("inference.ModelInferRequest"), cls("inference.ModelInferResponse")
    MetaRequest, MetaResponse = cls("inference.ModelMetadataRequest"), cls("inference.ModelMetadataResponse")
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    channel = grpc.insecure_channel(address, options=options)
    service = "/inference.GRPCInferenceService/"
    metadata = channel.unary_unary(service + "ModelMetadata", request_serializer=MetaRequest.SerializeToString,
                                   response_deserializer=MetaResponse.FromString)
    infer = channel.unary_unary(service + "ModelInfer", request_serializer=Request.SerializeToString,
                                response_deserializer=Response.FromString)
    meta = metadata(MetaRequest(name=model), timeout=30)
    request = Request(model_name=model)
    rng = np.random.default_rng(7)
    for tensor in meta.inputs:
        assert tensor.datatype == "FP32", tensor.datatype
        shape = [batch if (i == 0 and d < 0) else max(d, 1) for i, d in enumerate(tensor.shape)]
        request.inputs.add(name=tensor.name, datatype="FP32", shape=shape)
        request.raw_input_contents.append(rng.uniform(-1, 1, size=int(np.prod(shape))).astype(np.float32).tobytes())
    e2e, transport = [], []
    for i in range(requests + 100):
        start = time.perf_counter_ns()
        response = infer(request, timeout=30)
        end = time.perf_counter_ns()
        if i < 100:
            continue
        total = response.parameters["timing.server_total_ns"].int64_param
        e2e.append((end - start) / 1000)
        transport.append((end - start - total) / 1000)
    q = lambda v, p: float(np.percentile(v, p))
    result = {"client": f"python grpcio {grpc.__version__}", "model": model, "batch_size": batch,
              "requests": requests, "e2e_us": {"p50": q(e2e, 50), "p99": q(e2e, 99)},
              "transport_us": {"p50": q(transport, 50), "p99": q(transport, 99)}}
    print(json.dumps(result))
    if len(sys.argv) > 6:
        with open(sys.argv[6], "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
