"""Loading the compiled libraries with ctypes; a library that was not built is None."""
import ctypes
from functools import lru_cache
from pathlib import Path

LIB_DIR = Path(__file__).resolve().parent / "lib"
F = ctypes.POINTER(ctypes.c_float)
I = ctypes.c_int

SIGNATURES = {
    "matmul": [F, F, F, I, I, I],
    "conv2d": [F, F, F, I, I, I, I, I, I, I, I, I],
    "bias_relu": [F, F, F, I, I],
    "softmax": [F, F, I, I],
    "fused_dense": [F, F, F, F, I, I, I],
    "max_pool2d": [F, F, I, I, I, I, I, I],
    "avg_pool2d": [F, F, I, I, I, I, I, I],
    "batch_norm": [F, F, F, F, F, F, I, I, ctypes.c_float],
    "layer_norm": [F, F, F, F, I, I, ctypes.c_float],
    "elementwise": [F, F, F, ctypes.c_long, I],
    "reduce_sum": [F, F, I, I],
    "transpose": [F, F, I, I],
}
STATUS = {-1: "bad argument", -2: "CUDA error", -3: "no CUDA device"}


class OpError(RuntimeError):
    pass


@lru_cache(maxsize=None)
def load(name: str):
    path = LIB_DIR / f"libtfref_{name}.so"
    if not path.exists():
        return None
    return ctypes.CDLL(str(path))


def call(lib, symbol: str, op: str, *args) -> None:
    fn = getattr(lib, symbol)
    fn.argtypes = SIGNATURES[op]
    fn.restype = ctypes.c_int
    status = fn(*args)
    if status != 0:
        raise OpError(f"{symbol} failed: {STATUS.get(status, status)}")
