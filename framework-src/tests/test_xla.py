"""XLA: with an XLA build, the ops inside tf.function(jit_compile=True) are lowered by the
extension's XLA kernels (their HLO is plain XLA ops) and match TensorFlow's; without one,
jit-compiling them fails for want of an XLA kernel."""
import unittest

import numpy as np
import tensorflow as tf

import tfext

XLA = tfext.sysconfig.get_build_info()["is_xla_build"]
RNG = np.random.default_rng(11)

CASES = [
    # name, op, TensorFlow's equivalent, inputs, HLO instructions the lowering must produce
    ("TfextBiasRelu", tfext.bias_relu, lambda x, b: tf.nn.relu(tf.nn.bias_add(x, b)),
     lambda: (RNG.standard_normal((4, 6)), RNG.standard_normal(6)), ("maximum", "broadcast")),
    ("TfextGelu", tfext.gelu, lambda x: tf.nn.gelu(x, approximate=True),
     lambda: (RNG.standard_normal((5, 7)) * 3,), ("tanh",)),
    ("TfextRowSoftmax", tfext.row_softmax, lambda x: tf.nn.softmax(x, axis=-1),
     lambda: (RNG.standard_normal((3, 9)) * 10,), ("reduce", "exponential", "divide")),
]


def tensors_only(op):
    def call(*args):
        return op(*args)
    return call


def tensors(make, dtype=tf.float32):
    return [tf.constant(a, dtype) for a in make()]


@unittest.skipUnless(XLA, "not an XLA build (TF_ENABLE_XLA=0): the XLA kernels are not compiled")
class XlaTest(unittest.TestCase):
    def test_ops_compile_with_xla_and_match_tensorflow(self):
        for name, op, reference, make, hlo_ops in CASES:
            args = tensors(make)
            # tensors only: TF 2.21's experimental_get_compiler_ir asks for every argument,
            # defaults included (the op's name=None)
            f = tf.function(tensors_only(op), jit_compile=True)
            np.testing.assert_allclose(f(*args), reference(*args), rtol=1e-5, atol=1e-6, err_msg=name)
            # The HLO XLA compiled: the extension's lowering, no fallback to a custom call.
            hlo = f.experimental_get_compiler_ir(*args)(stage="hlo")
            for instruction in hlo_ops:
                self.assertIn(f" {instruction}(", hlo, f"{name}: {hlo}")
            self.assertNotIn("custom-call", hlo, name)

    def test_half_compiles_with_xla(self):
        for name, op, reference, make, _ in CASES:
            args = tensors(make, tf.float16)
            got = tf.function(op, jit_compile=True)(*args)
            want = tf.cast(reference(*[tf.cast(a, tf.float32) for a in args]), tf.float16)
            self.assertEqual(got.dtype, tf.float16)
            np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy().astype(np.float32),
                                       rtol=1e-2, atol=1e-2, err_msg=name)

    def test_training_step_compiles_with_xla(self):
        x, b = tf.constant(RNG.standard_normal((8, 5)), tf.float32), tf.constant(RNG.standard_normal(5), tf.float32)

        def grads(fn):
            def step(x, b):
                with tf.GradientTape() as tape:
                    tape.watch([x, b])
                    loss = tf.reduce_sum(fn(x, b) ** 2)
                return tape.gradient(loss, [x, b])
            return step

        ours = tf.function(grads(lambda x, b: tfext.row_softmax(tfext.gelu(tfext.bias_relu(x, b)))), jit_compile=True)
        theirs = grads(lambda x, b: tf.nn.softmax(tf.nn.gelu(tf.nn.relu(tf.nn.bias_add(x, b)), approximate=True)))
        for g, t in zip(ours(x, b), theirs(x, b)):
            np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-6)


@unittest.skipIf(XLA, "an XLA build: the XLA kernels are there (XlaTest)")
class NoXlaTest(unittest.TestCase):
    def test_jit_compiling_the_ops_fails_without_xla_kernels(self):
        for name, op, _, make, _ in CASES:
            args = tensors(make)
            with self.assertRaisesRegex(tf.errors.OpError, name):
                tf.function(op, jit_compile=True)(*args)


if __name__ == "__main__":
    unittest.main()
