"""Tensor ops on NumPy arrays. `device` is "cpu", "gpu" or None (a GPU when one is
visible, else the CPU). Inputs are computed in float32; float16 inputs give float16
results (the mixed-precision path of the benchmark)."""
import numpy as np

from tfref import _lib, config


def _f32(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(_lib.F)


def _backend(device):
    if device is None:
        device = "gpu" if config.list_physical_devices("GPU") else "cpu"
    if device == "cpu":
        return _lib.load("core"), "tfref_"
    if device == "gpu":
        lib = _lib.load("cuda")
        if lib is None:
            raise _lib.OpError("this build has no CUDA kernels (TF_NEED_CUDA=0)")
        return lib, "tfref_cuda_"
    raise ValueError(f"device must be 'cpu', 'gpu' or None, not {device!r}")


def _out_dtype(*xs):
    return np.float16 if all(np.asarray(x).dtype == np.float16 for x in xs) else np.float32


def matmul(a, b, device=None) -> np.ndarray:
    a32, b32 = _f32(a), _f32(b)
    if a32.ndim != 2 or b32.ndim != 2 or a32.shape[1] != b32.shape[0]:
        raise ValueError(f"matmul shapes {a32.shape} and {b32.shape} do not align")
    m, k = a32.shape
    n = b32.shape[1]
    out = np.empty((m, n), np.float32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "matmul", "matmul", _ptr(a32), _ptr(b32), _ptr(out), m, k, n)
    return out.astype(_out_dtype(a, b), copy=False)


def conv2d(x, filters, stride: int = 1, padding: str = "SAME", device=None) -> np.ndarray:
    x32, f32 = _f32(x), _f32(filters)
    if x32.ndim != 4 or f32.ndim != 4 or x32.shape[3] != f32.shape[2]:
        raise ValueError(f"conv2d wants NHWC input and HWIO filters, got {x32.shape} and {f32.shape}")
    n, h, w, c = x32.shape
    kh, kw, _, o = f32.shape
    if padding == "SAME":
        pad = (kh - 1) // 2
    elif padding == "VALID":
        pad = 0
    else:
        raise ValueError("padding must be SAME or VALID")
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    out = np.empty((n, oh, ow, o), np.float32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "conv2d", "conv2d", _ptr(x32), _ptr(f32), _ptr(out), n, h, w, c, kh, kw, o, stride, pad)
    return out.astype(_out_dtype(x, filters), copy=False)


def bias_relu(x, bias, device=None) -> np.ndarray:
    x32, b32 = _f32(x), _f32(bias)
    cols = x32.shape[-1]
    if b32.shape != (cols,):
        raise ValueError(f"bias shape {b32.shape} does not match the last dimension {cols}")
    out = np.empty_like(x32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "bias_relu", "bias_relu", _ptr(x32), _ptr(b32), _ptr(out), x32.size // cols, cols)
    return out.astype(_out_dtype(x, bias), copy=False)


def softmax(x, device=None) -> np.ndarray:
    x32 = _f32(x)
    cols = x32.shape[-1]
    out = np.empty_like(x32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "softmax", "softmax", _ptr(x32), _ptr(out), x32.size // cols, cols)
    return out.astype(_out_dtype(x), copy=False)


def _pool(name, x, window, stride, device):
    x32 = _f32(x)
    if x32.ndim != 4:
        raise ValueError(f"{name} wants NHWC input, got shape {x32.shape}")
    n, h, w, c = x32.shape
    stride = stride or window
    oh, ow = (h - window) // stride + 1, (w - window) // stride + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{name}: window {window} does not fit {h}x{w}")
    out = np.empty((n, oh, ow, c), np.float32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + name, name, _ptr(x32), _ptr(out), n, h, w, c, window, stride)
    return out.astype(_out_dtype(x), copy=False)


def max_pool2d(x, window: int = 2, stride: int = None, device=None) -> np.ndarray:
    return _pool("max_pool2d", x, window, stride, device)


def avg_pool2d(x, window: int = 2, stride: int = None, device=None) -> np.ndarray:
    return _pool("avg_pool2d", x, window, stride, device)


def batch_norm(x, mean, variance, gamma, beta, eps: float = 1e-3, device=None) -> np.ndarray:
    """Inference batch normalization over the last dimension."""
    x32 = _f32(x)
    cols = x32.shape[-1]
    params = [_f32(p) for p in (mean, variance, gamma, beta)]
    if any(p.shape != (cols,) for p in params):
        raise ValueError(f"batch_norm parameters must have shape ({cols},)")
    out = np.empty_like(x32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "batch_norm", "batch_norm", _ptr(x32), *[_ptr(p) for p in params], _ptr(out),
              x32.size // cols, cols, eps)
    return out.astype(_out_dtype(x), copy=False)


def layer_norm(x, gamma, beta, eps: float = 1e-5, device=None) -> np.ndarray:
    x32, g, b = _f32(x), _f32(gamma), _f32(beta)
    cols = x32.shape[-1]
    if g.shape != (cols,) or b.shape != (cols,):
        raise ValueError(f"layer_norm gamma and beta must have shape ({cols},)")
    out = np.empty_like(x32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "layer_norm", "layer_norm", _ptr(x32), _ptr(g), _ptr(b), _ptr(out),
              x32.size // cols, cols, eps)
    return out.astype(_out_dtype(x), copy=False)


def _elementwise(a, b, op, device):
    a32 = _f32(a)
    b32 = _f32(b) if b is not None else None
    if b32 is not None and b32.shape != a32.shape:
        raise ValueError(f"shapes {a32.shape} and {b32.shape} differ")
    out = np.empty_like(a32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "elementwise", "elementwise", _ptr(a32), _ptr(b32) if b32 is not None else None,
              _ptr(out), a32.size, op)
    return out.astype(_out_dtype(*([a] if b is None else [a, b])), copy=False)


def add(a, b, device=None) -> np.ndarray:
    return _elementwise(a, b, 0, device)


def multiply(a, b, device=None) -> np.ndarray:
    return _elementwise(a, b, 1, device)


def gelu(x, device=None) -> np.ndarray:
    return _elementwise(x, None, 2, device)


def reduce_sum(x, device=None) -> np.ndarray:
    """Sum over the last dimension."""
    x32 = _f32(x)
    cols = x32.shape[-1]
    out = np.empty(x32.shape[:-1] or (1,), np.float32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "reduce_sum", "reduce_sum", _ptr(x32), _ptr(out), x32.size // cols, cols)
    return out.reshape(x32.shape[:-1]).astype(_out_dtype(x), copy=False)


def transpose(x, device=None) -> np.ndarray:
    x32 = _f32(x)
    if x32.ndim != 2:
        raise ValueError("transpose takes a 2-D array")
    out = np.empty((x32.shape[1], x32.shape[0]), np.float32)
    lib, prefix = _backend(device)
    _lib.call(lib, prefix + "transpose", "transpose", _ptr(x32), _ptr(out), *x32.shape)
    return out.astype(_out_dtype(x), copy=False)
