"""XLA-style fused kernels; this module exists only in builds with TF_ENABLE_XLA=1."""
import numpy as np

from tfref import _lib, config
from tfref.ops import _f32, _out_dtype, _ptr


def fused_dense(x, w, b, device=None) -> np.ndarray:
    """relu(x @ w + b) in one fused kernel."""
    x32, w32, b32 = _f32(x), _f32(w), _f32(b)
    m, k = x32.shape
    n = w32.shape[1]
    if w32.shape[0] != k or b32.shape != (n,):
        raise ValueError(f"fused_dense shapes {x32.shape}, {w32.shape}, {b32.shape} do not align")
    out = np.empty((m, n), np.float32)
    if device is None:
        device = "gpu" if config.list_physical_devices("GPU") else "cpu"
    symbol = "tfref_xla_cuda_fused_dense" if device == "gpu" else "tfref_xla_fused_dense"
    _lib.call(_lib.load("xla"), symbol, "fused_dense", _ptr(x32), _ptr(w32), _ptr(b32), _ptr(out), m, k, n)
    return out.astype(_out_dtype(x, w, b), copy=False)
