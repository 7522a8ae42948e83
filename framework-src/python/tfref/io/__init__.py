"""File I/O through pluggable file systems, chosen by URL scheme. Local paths always
work; gs:// and hdfs:// exist only in builds with TF_NEED_GCP=1 / TF_NEED_HDFS=1."""
import importlib
import importlib.util
import os

from tfref.sysconfig import get_build_info


class UnimplementedError(NotImplementedError):
    pass


_MODULES = {"gs": ("tfref.io.gcs", "TF_NEED_GCP"), "hdfs": ("tfref.io.hdfs", "TF_NEED_HDFS")}


def available_schemes() -> list:
    schemes = ["file"]
    for scheme, (module, _) in _MODULES.items():
        if importlib.util.find_spec(module) is not None:
            schemes.append(scheme)
    return schemes


def _filesystem(path: str):
    scheme = path.split("://", 1)[0] if "://" in path else "file"
    if scheme == "file":
        return None
    if scheme not in _MODULES or scheme not in available_schemes():
        toggle = _MODULES.get(scheme, (None, "a toggle"))[1]
        raise UnimplementedError(f"File system scheme '{scheme}' not implemented "
                                 f"(this build was configured with {toggle}=0)" if scheme in _MODULES
                                 else f"File system scheme '{scheme}' not implemented")
    return importlib.import_module(_MODULES[scheme][0])


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def read(path: str) -> bytes:
    fs = _filesystem(path)
    if fs is None:
        with open(_local(path), "rb") as f:
            return f.read()
    return fs.read(path)


def write(path: str, data: bytes) -> None:
    fs = _filesystem(path)
    if fs is None:
        with open(_local(path), "wb") as f:
            f.write(data)
        return
    fs.write(path, data)


def listdir(path: str) -> list:
    fs = _filesystem(path)
    if fs is None:
        return sorted(os.listdir(_local(path)))
    return fs.listdir(path)


def exists(path: str) -> bool:
    fs = _filesystem(path)
    if fs is None:
        return os.path.exists(_local(path))
    return fs.exists(path)


__all__ = ["read", "write", "listdir", "exists", "available_schemes", "UnimplementedError", "get_build_info"]
