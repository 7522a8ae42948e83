"""DALI's entry in the image report (run in the image by image_report.py; standard library
and the image's own DALI only): DALI's version, its TensorFlow plugin's (the compiled op
library must load), and the patches nvbuild.sh applied (its build stamp)."""

import json
from importlib import metadata

STAMP = "/opt/tensorflow/.dali-tf-plugin-build-id"


def report():
    try:
        import nvidia.dali as dali
    except ImportError:
        return None
    found = {"version": dali.__version__, "plugin": None, "patches": []}
    try:
        import nvidia.dali.plugin.tf  # noqa: F401  (loads the compiled op library)

        found["plugin"] = next(
            (
                d.version
                for d in metadata.distributions()
                if (d.metadata["Name"] or "").startswith("nvidia-dali-tf-plugin")
            ),
            "",
        )
    except Exception as exc:  # ImportError, or the op library's NotFoundError
        found["plugin_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        with open(STAMP) as f:
            found["patches"] = json.loads(f.read().split("\n")[1] or "[]")
    except (OSError, ValueError, IndexError):
        pass
    return found


if __name__ == "__main__":
    print(json.dumps(report(), indent=1))
