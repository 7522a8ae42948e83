"""tfref: the reference framework compiled by nvbuild.sh (a few real tensor ops with
CPU and CUDA kernels, optional XLA-style fusion and gs:// / hdfs:// file systems)."""
from tfref import config, io, sysconfig
from tfref.ops import bias_relu, conv2d, matmul, softmax

__version__ = sysconfig.get_build_info()["version"]

__all__ = ["matmul", "conv2d", "bias_relu", "softmax", "config", "io", "sysconfig", "__version__"]
