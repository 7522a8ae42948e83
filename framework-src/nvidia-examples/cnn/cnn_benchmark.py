#!/usr/bin/env python3
"""Inference throughput of a small convolutional network on synthetic images, using the
framework built into this image (tfref). Runs on the CPU, or on a GPU when one is visible.

  python3 cnn_benchmark.py --batch_size 32 --num_batches 20 --precision fp16 --xla
"""
import argparse
import sys
import time

import numpy as np

import tfref


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch_size", type=int, default=32, help="images per batch")
    p.add_argument("--num_batches", type=int, default=20, help="timed batches")
    p.add_argument("--num_warmup_batches", type=int, default=2, help="untimed batches first")
    p.add_argument("--image_size", type=int, default=32, help="height and width of the synthetic images")
    p.add_argument("--num_classes", type=int, default=10)
    p.add_argument("--precision", choices=("fp32", "fp16"), default="fp32",
                   help="fp16 keeps activations and weights in half precision between ops")
    p.add_argument("--xla", action="store_true", help="use the XLA-style fused dense kernel")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--display_every", type=int, default=10)
    args = p.parse_args(argv)
    for name in ("batch_size", "num_batches", "image_size", "num_classes", "display_every"):
        if getattr(args, name) <= 0:
            p.error(f"--{name} must be positive")
    return args


class SmallConvNet:
    """conv3x3(16) -> bias+relu -> conv3x3/2(32) -> bias+relu -> global pool -> dense -> softmax."""

    def __init__(self, num_classes, dtype, device, xla):
        rng = np.random.default_rng(0)
        self.w1 = (rng.standard_normal((3, 3, 3, 16)) * 0.2).astype(dtype)
        self.b1 = np.zeros(16, dtype)
        self.w2 = (rng.standard_normal((3, 3, 16, 32)) * 0.1).astype(dtype)
        self.b2 = np.zeros(32, dtype)
        self.w3 = (rng.standard_normal((32, num_classes)) * 0.1).astype(dtype)
        self.b3 = np.zeros(num_classes, dtype)
        self.device, self.xla = device, xla

    def __call__(self, images):
        d = self.device
        x = tfref.bias_relu(tfref.conv2d(images, self.w1, 1, "SAME", device=d), self.b1, device=d)
        x = tfref.bias_relu(tfref.conv2d(x, self.w2, 2, "SAME", device=d), self.b2, device=d)
        x = x.mean(axis=(1, 2)).astype(x.dtype)
        if self.xla:
            from tfref import xla
            logits = xla.fused_dense(x, self.w3, self.b3, device=d)
        else:
            logits = tfref.bias_relu(tfref.matmul(x, self.w3, device=d), self.b3, device=d)
        return tfref.softmax(logits, device=d)


def main(argv=None) -> int:
    args = parse_args(argv)
    info = tfref.sysconfig.get_build_info()
    if args.xla and not info["is_xla_build"]:
        print("error: --xla needs a build with TF_ENABLE_XLA=1", file=sys.stderr)
        return 2
    device = None if args.device == "auto" else args.device
    if device == "gpu" and not tfref.config.list_physical_devices("GPU"):
        print("error: --device gpu but no GPU is visible", file=sys.stderr)
        return 2
    dtype = np.float16 if args.precision == "fp16" else np.float32
    net = SmallConvNet(args.num_classes, dtype, device, args.xla)
    rng = np.random.default_rng(1)
    images = rng.standard_normal((args.batch_size, args.image_size, args.image_size, 3)).astype(dtype)
    where = device or ("gpu" if tfref.config.list_physical_devices("GPU") else "cpu")
    print(f"tfref {tfref.__version__} | device {where} | batch {args.batch_size} | "
          f"precision {args.precision} | xla {'on' if args.xla else 'off'}")
    for _ in range(args.num_warmup_batches):
        net(images)
    start = time.perf_counter()
    for step in range(1, args.num_batches + 1):
        probs = net(images)
        if step % args.display_every == 0 or step == args.num_batches:
            rate = step * args.batch_size / (time.perf_counter() - start)
            print(f"step {step}: {rate:.1f} images/sec")
    total = args.num_batches * args.batch_size / (time.perf_counter() - start)
    assert np.allclose(probs.astype(np.float32).sum(axis=1), 1, atol=1e-2)
    print(f"total images/sec: {total:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
