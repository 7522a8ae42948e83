"""tfref: the reference framework compiled by nvbuild.sh (a few real tensor ops with
CPU and CUDA kernels, optional XLA-style fusion and gs:// / hdfs:// file systems)."""
from tfref import config, io, sysconfig
from tfref.ops import (add, avg_pool2d, batch_norm, bias_relu, conv2d, gelu, layer_norm, matmul, max_pool2d,
                       multiply, reduce_sum, softmax, transpose)

__version__ = sysconfig.get_build_info()["version"]

__all__ = ["matmul", "conv2d", "bias_relu", "softmax", "max_pool2d", "avg_pool2d", "batch_norm", "layer_norm",
           "add", "multiply", "gelu", "reduce_sum", "transpose", "config", "io", "sysconfig", "__version__"]
