"""tfext.sysconfig: the build info describes this build and this source tree, and names the
op library."""
import importlib.util
import os
import re
import unittest
from pathlib import Path

import tensorflow as tf

import tfext

ROOT = Path(__file__).resolve().parent.parent  # the source tree the tests ship in
KEYS = {"framework_name", "version", "is_cuda_build", "cuda_compute_capabilities", "cuda_version", "is_xla_build",
        "tensorflow_version", "cxx11_abi", "source_digest", "source_commit", "patches", "modified_files"}


class BuildInfoTest(unittest.TestCase):
    def setUp(self):
        self.info = tfext.sysconfig.get_build_info()

    def test_keys_and_identity(self):
        self.assertLessEqual(KEYS, set(self.info))
        self.assertEqual(self.info["framework_name"], "tfext")
        self.assertEqual(self.info["version"], tfext.__version__)
        self.assertEqual(self.info["version"], (ROOT / "VERSION").read_text().strip())
        self.assertIsInstance(self.info["patches"], list)
        self.assertIsInstance(self.info["modified_files"], list)

    def test_compiled_against_this_tensorflow(self):
        self.assertEqual(self.info["tensorflow_version"], tf.__version__)
        self.assertEqual(self.info["cxx11_abi"], tf.sysconfig.CXX11_ABI_FLAG)

    def test_capabilities_sass_each_ptx_newest(self):
        caps = self.info["cuda_compute_capabilities"]
        if not self.info["is_cuda_build"]:
            self.assertEqual(caps, [])
            return
        self.assertTrue(self.info["cuda_version"])
        sass = [c for c in caps if c.startswith("sm_")]
        self.assertTrue(sass and all(re.fullmatch(r"sm_\d{2,3}", c) for c in sass), caps)
        self.assertEqual(sass, sorted(sass, key=lambda c: int(c[3:])))
        self.assertEqual(caps, sass + ["compute_" + sass[-1][3:]])

    def test_library(self):
        lib = tfext.sysconfig.get_library()
        self.assertTrue(os.path.isabs(lib) and os.path.isfile(lib), lib)
        self.assertEqual(tfext.sysconfig.get_cuda_library(), lib if self.info["is_cuda_build"] else "")

    def test_source_digest_is_this_tree(self):
        tool = ROOT / "tools" / "write_build_info.py"
        if not tool.is_file():
            self.skipTest(f"{tool} is not here: not run from the source tree")
        spec = importlib.util.spec_from_file_location("write_build_info", tool)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.assertEqual(self.info["source_digest"], module.source_digest(),
                         "the installed tfext was not built from this source tree (rebuild with nvbuild.sh)")


if __name__ == "__main__":
    unittest.main()
