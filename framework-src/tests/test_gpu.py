"""The CUDA kernels: registered for the GPU in a CUDA build (checked without a GPU), and
run against TensorFlow's own ops when a GPU is visible."""
import unittest

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels

import tfext

INFO = tfext.sysconfig.get_build_info()
OPS = ("TfextBiasRelu", "TfextGelu", "TfextRowSoftmax")
GPUS = tf.config.list_physical_devices("GPU")
RNG = np.random.default_rng(5)


def registered(op, device):
    return sorted(tf.as_dtype(k.constraint[0].allowed_values.list.type[0]).name
                  for k in kernels.get_registered_kernels_for_op(op).kernel if k.device_type == device)


class RegistrationTest(unittest.TestCase):
    def test_kernels_are_registered_per_device(self):
        for op in OPS:
            self.assertEqual(registered(op, "CPU"), ["float16", "float32", "float64"], op)
            self.assertEqual(registered(op, "GPU"), ["float16", "float32", "float64"] if INFO["is_cuda_build"] else [],
                             op)


@unittest.skipUnless(INFO["is_cuda_build"], "not a CUDA build (TF_NEED_CUDA=0): there are no GPU kernels")
@unittest.skipUnless(GPUS, "no GPU visible to TensorFlow (tf.config.list_physical_devices('GPU') is empty): the CUDA "
                           "kernels cannot run here; cuobjdump checks the code they carry")
class GpuTest(unittest.TestCase):
    def run_on_gpu(self, fn, *args):
        with tf.device("/GPU:0"):
            y = fn(*args)
        self.assertIn("GPU", y.device)
        return y

    def test_ops_on_the_gpu_match_tensorflow(self):
        for dtype, tol in ((tf.float32, 1e-5), (tf.float64, 1e-12), (tf.float16, 1e-2)):
            x = tf.constant(RNG.standard_normal((37, 300)), dtype)
            b = tf.constant(RNG.standard_normal(300), dtype)
            wide = lambda t: tf.cast(t, tf.float64)
            cases = [
                (tfext.bias_relu, lambda x, b: tf.nn.relu(tf.nn.bias_add(x, b)), (x, b)),
                (tfext.gelu, lambda x: tf.nn.gelu(x, approximate=True), (x * 3,)),
                (tfext.row_softmax, lambda x: tf.nn.softmax(x, axis=-1), (x * 10,)),
            ]
            for ours, theirs, args in cases:
                got = self.run_on_gpu(ours, *args)
                want = tf.cast(theirs(*[wide(a) for a in args]), dtype)
                np.testing.assert_allclose(wide(got), wide(want), rtol=tol, atol=tol, err_msg=f"{ours.__name__} {dtype}")

    def test_gradients_on_the_gpu(self):
        x, b = tf.constant(RNG.standard_normal((16, 8)), tf.float32), tf.constant(RNG.standard_normal(8), tf.float32)
        with tf.device("/GPU:0"), tf.GradientTape(persistent=True) as tape:
            tape.watch([x, b])
            ours = tf.reduce_sum(tfext.row_softmax(tfext.gelu(tfext.bias_relu(x, b))) ** 2)
            theirs = tf.reduce_sum(tf.nn.softmax(tf.nn.gelu(tf.nn.relu(tf.nn.bias_add(x, b)), approximate=True)) ** 2)
        for g, t in zip(tape.gradient(ours, [x, b]), tape.gradient(theirs, [x, b])):
            np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-6)

    @unittest.skipUnless(INFO["is_xla_build"], "not an XLA build")
    def test_xla_on_the_gpu(self):
        x = tf.constant(RNG.standard_normal((4, 64)), tf.float32)
        with tf.device("/GPU:0"):
            y = tf.function(lambda x: tfext.row_softmax(tfext.gelu(x)), jit_compile=True)(x)
        np.testing.assert_allclose(y, tf.nn.softmax(tf.nn.gelu(x, approximate=True)), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
