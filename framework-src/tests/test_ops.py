"""Each op against TensorFlow's equivalent on the CPU: eager, inside tf.function graphs
(with unknown shapes, so shape inference is exercised), gradients, and input checks."""
import unittest

import numpy as np
import tensorflow as tf

import tfext

RNG = np.random.default_rng(7)
TOL = {tf.float16: dict(rtol=1e-2, atol=1e-2), tf.float32: dict(rtol=1e-5, atol=1e-6),
       tf.float64: dict(rtol=1e-7, atol=1e-8)}  # TensorFlow's (Eigen's) tanh is not std::tanh to the last bit


def normal(shape, dtype=tf.float32, scale=1.0):
    return tf.constant(RNG.standard_normal(shape) * scale, dtype=dtype)


def reference_gelu(x):
    # TensorFlow's own op, computed in float32 for half inputs (its half path rounds each step).
    if x.dtype == tf.float16:
        return tf.cast(tf.nn.gelu(tf.cast(x, tf.float32), approximate=True), tf.float16)
    return tf.nn.gelu(x, approximate=True)


def reference_softmax(x):
    if x.dtype == tf.float16:
        return tf.cast(tf.nn.softmax(tf.cast(x, tf.float32), axis=-1), tf.float16)
    return tf.nn.softmax(x, axis=-1)


class OpsTest(unittest.TestCase):
    def assertClose(self, got, want):
        self.assertEqual(got.dtype, want.dtype)
        self.assertEqual(got.shape, want.shape)
        np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64),
                                   **TOL[want.dtype])

    def test_bias_relu_eager(self):
        for dtype in (tf.float16, tf.float32, tf.float64):
            for shape in ((5,), (6, 10), (2, 3, 4, 7)):
                x, b = normal(shape, dtype), normal(shape[-1:], dtype)
                y = tfext.bias_relu(x, b)
                self.assertIn("CPU", y.device)
                want = tf.nn.relu(x + b) if len(shape) == 1 else tf.nn.relu(tf.nn.bias_add(x, b))
                self.assertClose(y, want)

    def test_gelu_eager(self):
        for dtype in (tf.float16, tf.float32, tf.float64):
            x = normal((3, 50), dtype, scale=3.0)
            self.assertClose(tfext.gelu(x), reference_gelu(x))

    def test_row_softmax_eager(self):
        for dtype in (tf.float16, tf.float32, tf.float64):
            x = normal((4, 300), dtype, scale=20.0 if dtype != tf.float16 else 4.0)  # large logits: needs the max shift
            y = tfext.row_softmax(x)
            self.assertClose(y, reference_softmax(x))
            np.testing.assert_allclose(tf.reduce_sum(tf.cast(y, tf.float64), axis=-1), 1.0,
                                       rtol=1e-2 if dtype == tf.float16 else 1e-5)

    def test_ops_in_graphs_with_unknown_shapes(self):
        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None], tf.float32)])
        def ours(x, b):
            h = tfext.bias_relu(x, b)
            return tfext.row_softmax(tfext.gelu(h))

        @tf.function
        def theirs(x, b):
            return tf.nn.softmax(tf.nn.gelu(tf.nn.relu(tf.nn.bias_add(x, b)), approximate=True), axis=-1)

        graph = ours.get_concrete_function().graph
        types = {op.type for op in graph.get_operations()}
        self.assertLessEqual({"TfextBiasRelu", "TfextGelu", "TfextRowSoftmax"}, types)
        for shape in ((3, 8), (17, 5)):
            x, b = normal(shape), normal(shape[-1:])
            self.assertClose(ours(x, b), theirs(x, b))

    def test_shape_inference(self):
        seen = []

        @tf.function
        def trace(x, b):
            ys = tfext.bias_relu(x, b), tfext.gelu(x), tfext.row_softmax(x)
            seen.extend(y.shape.as_list() for y in ys)
            return ys

        trace.get_concrete_function(tf.TensorSpec([None, 6], tf.float32), tf.TensorSpec([None], tf.float32))
        self.assertEqual(seen, [[None, 6]] * 3)  # bias's unknown length merged with x's known last dimension

    def test_gradients_match_tensorflow(self):
        x, b = normal((6, 9), tf.float64), normal((9,), tf.float64)
        w = normal((6, 9), tf.float64)  # a random cotangent
        cases = [
            ("bias_relu", lambda x, b: tfext.bias_relu(x, b), lambda x, b: tf.nn.relu(tf.nn.bias_add(x, b))),
            ("gelu", lambda x, b: tfext.gelu(x + b), lambda x, b: tf.nn.gelu(x + b, approximate=True)),
            ("row_softmax", lambda x, b: tfext.row_softmax(x + b), lambda x, b: tf.nn.softmax(x + b, axis=-1)),
        ]
        for name, ours, theirs in cases:
            got, want = [], []
            for fn, out in ((ours, got), (theirs, want)):
                with tf.GradientTape() as tape:
                    tape.watch([x, b])
                    loss = tf.reduce_sum(fn(x, b) * w)
                out.extend(tape.gradient(loss, [x, b]))
            for g, t in zip(got, want):
                np.testing.assert_allclose(g, t, rtol=1e-6, atol=1e-8, err_msg=name)

    def test_gradients_in_graph(self):
        @tf.function
        def grads(x, b):
            with tf.GradientTape() as tape:
                tape.watch([x, b])
                loss = tf.reduce_sum(tfext.gelu(tfext.bias_relu(x, b)))
            return tape.gradient(loss, [x, b])

        @tf.function
        def reference(x, b):
            with tf.GradientTape() as tape:
                tape.watch([x, b])
                loss = tf.reduce_sum(tf.nn.gelu(tf.nn.relu(tf.nn.bias_add(x, b)), approximate=True))
            return tape.gradient(loss, [x, b])

        x, b = normal((2, 3, 4)), normal((4,))
        for g, t in zip(grads(x, b), reference(x, b)):
            self.assertClose(g, t)

    def test_empty_inputs(self):
        self.assertEqual(tfext.bias_relu(tf.zeros((0, 3)), tf.zeros((3,))).shape, (0, 3))
        self.assertEqual(tfext.gelu(tf.zeros((0,))).shape, (0,))
        self.assertEqual(tfext.row_softmax(tf.zeros((0, 4))).shape, (0, 4))

    def test_bad_inputs_are_refused(self):
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "Dimensions must be equal|bias has 3"):
            tfext.bias_relu(tf.zeros((2, 4)), tf.zeros((3,)))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "must be rank 2|2-D"):
            tfext.row_softmax(tf.zeros((2, 3, 4)))
        with self.assertRaises(ValueError):  # caught by shape inference while tracing
            tf.function(lambda: tfext.bias_relu(tf.zeros((2, 4)), tf.zeros((3,)))).get_concrete_function()
        with self.assertRaises((TypeError, tf.errors.InvalidArgumentError)):  # T: {half, float, double}
            tfext.gelu(tf.zeros((2,), tf.int32))


if __name__ == "__main__":
    unittest.main()
