"""What this build of tfref was built from, in the spirit of tf.sysconfig.get_build_info()."""
import copy
from pathlib import Path


def get_build_info() -> dict:
    from tfref._build_info import BUILD_INFO

    return copy.deepcopy(BUILD_INFO)


def get_lib() -> str:
    return str(Path(__file__).resolve().parent / "lib")


def get_cuda_library() -> str:
    """Path of the library holding the CUDA kernels (empty when not a CUDA build)."""
    path = Path(get_lib()) / "libtfref_cuda.so"
    return str(path) if path.exists() else ""
