#!/usr/bin/env python3
"""Writes ResNet-50 (torchvision's architecture, random weights, FP32) as a chronoserve model:
REPO/resnet50/config.pbtxt and REPO/resnet50/1/model.pt (TorchScript, traced).

Runs where PyTorch and torchvision are installed (the GPU machine has both); the server and the
benchmarks need no Python. Usage: export_resnet50.py REPO [--max-batch-size 8] [--graphs 1,8]
"""
import argparse
import os

import torch
import torchvision


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("repo", help="model repository to write into")
    parser.add_argument("--name", default="resnet50")
    parser.add_argument("--max-batch-size", type=int, default=8)
    parser.add_argument("--graphs", default="",
                        help="CUDA graph batch buckets, e.g. 1,8 (empty: eager)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model = torchvision.models.resnet50(weights=None).eval()
    with torch.inference_mode():
        example = torch.rand(1, 3, 224, 224)
        traced = torch.jit.trace(model, example)
        # The traced module must agree with the Python one on a fresh input.
        check = torch.rand(2, 3, 224, 224)
        err = (traced(check) - model(check)).abs().max().item()
        if err > 1e-4:
            raise SystemExit(f"traced ResNet-50 differs from eager by {err}")

    directory = os.path.join(args.repo, args.name)
    os.makedirs(os.path.join(directory, "1"), exist_ok=True)
    traced.save(os.path.join(directory, "1", "model.pt"))
    config = [
        f'name: "{args.name}"',
        'platform: "pytorch_libtorch"',
        f"max_batch_size: {args.max_batch_size}",
        'input { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }',
        'output { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1000 ] }',
        "instance_group [ { count: 1 kind: KIND_GPU } ]",
        "dynamic_batching { max_queue_delay_microseconds: 0 }",
    ]
    if args.graphs:
        config.append("optimization { cuda { graphs: true } }")
        config.append('parameters { key: "cuda_graph_batch_sizes" '
                      f'value {{ string_value: "{args.graphs}" }} }}')
    with open(os.path.join(directory, "config.pbtxt"), "w") as f:
        f.write("\n".join(config) + "\n")
    print(f"wrote {directory} (max_batch_size {args.max_batch_size}, "
          f"graphs {args.graphs or 'off'}, trace check max abs error {err:.2e})")


if __name__ == "__main__":
    main()
