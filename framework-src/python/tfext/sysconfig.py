"""What this build of tfext is (in the spirit of tf.sysconfig.get_build_info()) and where
its op library is."""
import copy
import os

LIBRARY_NAME = "_tfext_ops.so"


def get_build_info() -> dict:
    """framework_name, version, is_cuda_build, cuda_compute_capabilities (sm_XX for each
    capability, compute_XX for the newest), cuda_version, is_xla_build, tensorflow_version
    (the TensorFlow compiled against), cxx11_abi, source_digest, source_commit, patches,
    modified_files."""
    from tfext._build_info import BUILD_INFO

    return copy.deepcopy(BUILD_INFO)


def get_lib() -> str:
    """The directory holding the op library."""
    return os.path.dirname(os.path.abspath(__file__))


def get_library() -> str:
    """Absolute path of the op library (CPU, CUDA and XLA kernels alike)."""
    return os.path.join(get_lib(), LIBRARY_NAME)


def get_cuda_library() -> str:
    """The library carrying the CUDA kernels: the op library in a CUDA build, else ''."""
    return get_library() if get_build_info()["is_cuda_build"] else ""
