"""tfext: the project's TensorFlow custom ops, compiled by nvbuild.sh against the installed
TensorFlow (CPU kernels always, CUDA kernels and XLA lowerings when the build enabled them).

    import tensorflow as tf, tfext
    y = tfext.bias_relu(x, bias)   # == tf.nn.relu(tf.nn.bias_add(x, bias))
    y = tfext.gelu(x)              # == tf.nn.gelu(x, approximate=True)
    y = tfext.row_softmax(x)       # == tf.nn.softmax(x, axis=-1), x 2-D

Import tfext before the first XLA compilation of the process: TensorFlow registers XLA
kernels once, so a library loaded later would not get its XLA lowerings used.
"""
from tfext import sysconfig
from tfext.ops import bias_relu, gelu, row_softmax

__version__ = sysconfig.get_build_info()["version"]

__all__ = ["bias_relu", "gelu", "row_softmax", "sysconfig", "__version__"]
