"""CPU kernels checked against NumPy; GPU kernels too when a GPU is visible."""
import unittest

import numpy as np

import tfref

RNG = np.random.default_rng(7)
HAS_GPU = bool(tfref.config.list_physical_devices("GPU"))


def conv_reference(x, f, stride, pad):
    n, h, w, _ = x.shape
    kh, kw, _, o = f.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oh, ow, o), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            y[:, i, j, :] = np.tensordot(patch, f, axes=([1, 2, 3], [0, 1, 2]))
    return y


class OpsTest(unittest.TestCase):
    devices = ["cpu"] + (["gpu"] if HAS_GPU else [])

    def test_matmul(self):
        a, b = RNG.standard_normal((7, 13)), RNG.standard_normal((13, 5))
        for d in self.devices:
            np.testing.assert_allclose(tfref.matmul(a, b, device=d), a @ b, rtol=1e-4, atol=1e-4)

    def test_conv2d_same_and_valid_with_stride(self):
        x, f = RNG.standard_normal((2, 9, 8, 3)), RNG.standard_normal((3, 3, 3, 4))
        for d in self.devices:
            np.testing.assert_allclose(tfref.conv2d(x, f, 1, "SAME", device=d), conv_reference(x, f, 1, 1),
                                       rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(tfref.conv2d(x, f, 2, "VALID", device=d), conv_reference(x, f, 2, 0),
                                       rtol=1e-4, atol=1e-4)

    def test_bias_relu(self):
        x, b = RNG.standard_normal((6, 10)), RNG.standard_normal(10)
        for d in self.devices:
            np.testing.assert_allclose(tfref.bias_relu(x, b, device=d), np.maximum(x + b, 0), rtol=1e-6, atol=1e-6)

    def test_softmax(self):
        x = RNG.standard_normal((4, 300)) * 20
        e = np.exp(x - x.max(axis=1, keepdims=True))
        for d in self.devices:
            y = tfref.softmax(x, device=d)
            np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(y.sum(axis=1), 1, rtol=1e-5)

    def test_pooling(self):
        x = RNG.standard_normal((2, 6, 8, 3))
        blocks = x.reshape(2, 3, 2, 4, 2, 3)
        for d in self.devices:
            np.testing.assert_allclose(tfref.max_pool2d(x, 2, device=d), blocks.max(axis=(2, 4)), rtol=1e-6)
            np.testing.assert_allclose(tfref.avg_pool2d(x, 2, device=d), blocks.mean(axis=(2, 4)), rtol=1e-5,
                                       atol=1e-6)

    def test_batch_and_layer_norm(self):
        x = RNG.standard_normal((5, 7))
        mean, var, g, b = RNG.standard_normal(7), RNG.random(7) + 0.5, RNG.standard_normal(7), RNG.standard_normal(7)
        mu, sd = x.mean(axis=1, keepdims=True), x.std(axis=1, keepdims=True)
        for d in self.devices:
            np.testing.assert_allclose(tfref.batch_norm(x, mean, var, g, b, eps=1e-3, device=d),
                                       g * (x - mean) / np.sqrt(var + 1e-3) + b, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(tfref.layer_norm(x, g, b, eps=1e-5, device=d),
                                       (x - mu) / np.sqrt(sd ** 2 + 1e-5) * g + b, rtol=1e-4, atol=1e-4)

    def test_elementwise_reduce_transpose(self):
        a, b = RNG.standard_normal((4, 6)), RNG.standard_normal((4, 6))
        gelu = 0.5 * a * (1 + np.tanh(0.7978845608 * (a + 0.044715 * a ** 3)))
        for d in self.devices:
            np.testing.assert_allclose(tfref.add(a, b, device=d), a + b, rtol=1e-6)
            np.testing.assert_allclose(tfref.multiply(a, b, device=d), a * b, rtol=1e-6)
            np.testing.assert_allclose(tfref.gelu(a, device=d), gelu, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(tfref.reduce_sum(a, device=d), a.sum(axis=1), rtol=1e-5)
            np.testing.assert_allclose(tfref.transpose(a, device=d), a.T)

    def test_float16_in_float16_out(self):
        a = RNG.standard_normal((4, 4)).astype(np.float16)
        self.assertEqual(tfref.matmul(a, a, device="cpu").dtype, np.float16)

    def test_bad_shapes_raise(self):
        with self.assertRaises(ValueError):
            tfref.matmul(np.ones((2, 3)), np.ones((4, 2)))
        with self.assertRaises(ValueError):
            tfref.bias_relu(np.ones((2, 3)), np.ones(4))

    def test_gpu_without_a_device_fails_clearly(self):
        if HAS_GPU or not tfref.sysconfig.get_cuda_library():
            self.skipTest("needs a CUDA build on a machine without a GPU")
        with self.assertRaisesRegex(RuntimeError, "no CUDA device"):
            tfref.matmul(np.ones((2, 2)), np.ones((2, 2)), device="gpu")

    @unittest.skipUnless(tfref.sysconfig.get_build_info()["is_xla_build"], "XLA not built")
    def test_xla_fused_dense_matches_unfused(self):
        from tfref import xla
        x, w, b = RNG.standard_normal((5, 8)), RNG.standard_normal((8, 6)), RNG.standard_normal(6)
        for d in self.devices:
            np.testing.assert_allclose(xla.fused_dense(x, w, b, device=d), np.maximum(x @ w + b, 0),
                                       rtol=1e-4, atol=1e-4)


class BuildInfoTest(unittest.TestCase):
    def test_build_info_shape(self):
        info = tfref.sysconfig.get_build_info()
        self.assertEqual(info["version"], tfref.__version__)
        if info["is_cuda_build"]:
            ccs = info["cuda_compute_capabilities"]
            self.assertTrue(ccs[-1].startswith("compute_"))
            self.assertTrue(all(c.startswith("sm_") for c in ccs[:-1]))
            self.assertEqual(ccs[-1][len("compute_"):], ccs[-2][len("sm_"):])


if __name__ == "__main__":
    unittest.main()
