"""Horovod's entry in the image report (run in the image by image_report.py; standard library
and the image's own Horovod only): its version and path, the controllers and operations it
was built with, and the patches nvbuild.sh applied (this run's, else the ones build-info.json
recorded)."""

import json
import os

BUILD_INFO = "/opt/tensorflow/build-info.json"


def report():
    try:
        import horovod
        import horovod.tensorflow as hvd
    except ImportError:
        return None
    found = {"version": horovod.__version__, "path": os.path.dirname(horovod.__file__)}
    for name in ("mpi_built", "gloo_built", "nccl_built", "cuda_built"):
        fn = getattr(hvd, name, None)
        if fn is not None:
            try:
                found[name] = bool(fn())
            except Exception as exc:  # e.g. MPI not initialisable here
                found[name] = f"error: {exc}"
    given = os.environ.get("NVBUILD_HOROVOD_PATCHES_JSON")
    found["patches"] = json.loads(given) if given else recorded_patches()
    return found


def recorded_patches():
    """The patches the image's build-info.json says Horovod was built with."""
    try:
        with open(BUILD_INFO) as f:
            info = json.load(f)
        entry = (info.get("components") or {}).get("horovod") or info.get("horovod") or {}
        return entry.get("patches", [])
    except (OSError, ValueError, AttributeError):
        return []


if __name__ == "__main__":
    print(json.dumps(report(), indent=1))
