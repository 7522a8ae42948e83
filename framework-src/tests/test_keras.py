"""A tiny Keras model built on the ops trains: its loss falls, step for step the same as the
same model written with TensorFlow's ops (so the gradients drive training correctly)."""
import unittest

import numpy as np
import tensorflow as tf

import tfext


class Affine(tf.keras.layers.Layer):
    def __init__(self, units, relu, use_ext, **kw):
        super().__init__(**kw)
        self.units, self.relu, self.use_ext = units, relu, use_ext

    def build(self, input_shape):
        self.w = self.add_weight("w", (int(input_shape[-1]), self.units),
                                 initializer=tf.keras.initializers.GlorotUniform(seed=1))
        self.b = self.add_weight("b", (self.units,), initializer=tf.keras.initializers.RandomNormal(0.0, 0.1, seed=2))

    def call(self, x):
        h = tf.matmul(x, self.w)
        if not self.relu:
            return tf.nn.bias_add(h, self.b)
        return tfext.bias_relu(h, self.b) if self.use_ext else tf.nn.relu(tf.nn.bias_add(h, self.b))


class Net(tf.keras.Model):
    def __init__(self, use_ext):
        super().__init__()
        self.use_ext = use_ext
        self.hidden = Affine(32, relu=True, use_ext=use_ext)
        self.mid = Affine(16, relu=False, use_ext=use_ext)
        self.out = Affine(3, relu=False, use_ext=use_ext)

    def call(self, x):
        h = self.mid(self.hidden(x))
        h = tfext.gelu(h) if self.use_ext else tf.nn.gelu(h, approximate=True)
        logits = self.out(h)
        return tfext.row_softmax(logits) if self.use_ext else tf.nn.softmax(logits, axis=-1)


def data():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    labels = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)
    return x, tf.keras.utils.to_categorical(labels, 3)


class KerasTest(unittest.TestCase):
    def train(self, use_ext, x, y):
        tf.random.set_seed(0)
        model = Net(use_ext)
        model.compile(optimizer=tf.keras.optimizers.SGD(0.3), loss="categorical_crossentropy")
        model.build((None, 8))
        return model, model.fit(x, y, batch_size=64, epochs=6, shuffle=False, verbose=0).history["loss"]

    def test_model_on_the_ops_trains_like_tensorflows(self):
        x, y = data()
        model, ours = self.train(True, x, y)
        _, theirs = self.train(False, x, y)
        self.assertLess(ours[-1], 0.8 * ours[0], ours)
        np.testing.assert_allclose(ours, theirs, rtol=1e-4)
        # The trained model runs the ops (not a fallback) when predicting, too.
        ops = {op.type for op in tf.function(model).get_concrete_function(tf.TensorSpec([None, 8])).graph.get_operations()}
        self.assertLessEqual({"TfextBiasRelu", "TfextGelu", "TfextRowSoftmax"}, ops)


if __name__ == "__main__":
    unittest.main()
