"""The ops, loaded from the compiled library, and their gradients (written with TensorFlow
ops, so they run on every device and compile under XLA too)."""
import tensorflow as tf

from tfext import sysconfig

_info = sysconfig.get_build_info()
if _info.get("tensorflow_version") and tf.__version__ != _info["tensorflow_version"]:
    raise ImportError(f"tfext {_info['version']} was compiled against TensorFlow {_info['tensorflow_version']}, "
                      f"but TensorFlow {tf.__version__} is installed: rebuild it (/opt/tensorflow/nvbuild.sh)")

_lib = tf.load_op_library(sysconfig.get_library())

OPS = ("TfextBiasRelu", "TfextGelu", "TfextRowSoftmax")


def _xla_devices(op):
    from tensorflow.python.framework import kernels

    return {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel
            if k.device_type.startswith("XLA_")}


# TensorFlow registers the XLA kernels of every op it knows once, at the first XLA
# compilation of the process: a library loaded after that has its lowerings ignored.
if _info.get("is_xla_build") and _xla_devices("Relu") and not _xla_devices(OPS[0]):
    import warnings

    warnings.warn("tfext was imported after TensorFlow's first XLA compilation in this process, so its XLA kernels "
                  "are not used: jit_compile of its ops will fail. Import tfext before compiling with XLA.",
                  RuntimeWarning, stacklevel=2)


def bias_relu(x, bias, name=None):
    """relu(x + bias), bias (1-D) added along x's last dimension:
    tf.nn.relu(tf.nn.bias_add(x, bias)) in one kernel."""
    return _lib.tfext_bias_relu(x=x, bias=bias, name=name)


def gelu(x, name=None):
    """The tanh approximation of GELU: tf.nn.gelu(x, approximate=True)."""
    return _lib.tfext_gelu(x=x, name=name)


def row_softmax(logits, name=None):
    """Softmax of each row of a 2-D tensor: tf.nn.softmax(logits, axis=-1)."""
    return _lib.tfext_row_softmax(logits=logits, name=name)


@tf.RegisterGradient("TfextBiasRelu")
def _bias_relu_grad(op, dy):
    y = op.outputs[0]
    dx = tf.where(y > 0, dy, tf.zeros_like(dy))
    rank = dx.shape.rank
    axes = list(range(rank - 1)) if rank is not None else tf.range(tf.rank(dx) - 1)
    return dx, tf.reduce_sum(dx, axis=axes)


@tf.RegisterGradient("TfextGelu")
def _gelu_grad(op, dy):
    x = op.inputs[0]
    # tf.constant, not tf.cast: casting a Python float goes through float32 first.
    c = tf.constant(0.7978845608028654, x.dtype)
    k = tf.constant(0.044715, x.dtype)
    t = tf.tanh(c * (x + k * x * x * x))
    dydx = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * k * x * x)
    return dy * dydx


@tf.RegisterGradient("TfextRowSoftmax")
def _row_softmax_grad(op, dy):
    y = op.outputs[0]
    return y * (dy - tf.reduce_sum(dy * y, axis=-1, keepdims=True))
