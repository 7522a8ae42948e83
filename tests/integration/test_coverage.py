"""The coverage report reads device code without cuobjdump: fatbin.py (image_report.py's reader) walks the
fatbin headers of each binary's .nv_fatbin. On the 21.08 release image (its CUDA 11.2
toolkit has cuobjdump) the parser must list exactly what cuobjdump lists, entry for entry,
for every binary it finds: TensorFlow's, ours, DALI's, cuDNN's, cuBLAS's, NCCL's and the
toolkit's libraries."""

import json

from .conftest import docker

# Run in a container of the image: the image's own fatbin.py, then cuobjdump on each
# binary it found (side by side: cuobjdump reads whole files, a minute and more in all).
CROSS_CHECK = r"""
import json, os, re, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, "/opt/tensorflow")
import fatbin, libraries

start = time.monotonic()
binaries = libraries.cuda_binaries({})
took = time.monotonic() - start

def entries(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        read = lambda n, offset: os.pread(fd, n, offset)
        offset, size = fatbin.elf_sections(read)[fatbin.FATBIN_SECTION]
        found = [(kind, arch) for _, kind, arch, _, _, _ in fatbin.fatbin_entries(read, offset, size)]
    finally:
        os.close(fd)
    return [sum(1 for k, _ in found if k in fatbin.SASS_KINDS), sum(1 for k, _ in found if k == 1)]

def listing(b):
    out = {"path": b["path"], "component": b["component"], "ours": [b["sass"], b["ptx"]],
           "our_entries": entries(b["path"]), "no_kernels": bool(b.get("no_kernels"))}
    lists, counts = [], []
    for flag in ("--list-elf", "--list-ptx"):
        run = subprocess.run(["cuobjdump", flag, b["path"]], capture_output=True, text=True)
        lists.append(sorted(set(re.findall(r"\.sm_(\d+)[a-z]?\.(?:cubin|ptx)", run.stdout)), key=int))
        counts.append(len([line for line in run.stdout.splitlines() if line.strip()]))
    out.update(cuobjdump=lists, cuobjdump_entries=counts)
    return out

with ThreadPoolExecutor(4) as pool:
    result = list(pool.map(listing, binaries))
print(json.dumps({"took": took, "binaries": result}))
"""


def test_the_fatbin_parser_lists_what_cuobjdump_lists(release_image):
    out = docker("run", "--rm", "--entrypoint", "python3", release_image, "-c", CROSS_CHECK, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    binaries = result["binaries"]
    assert {"tensorflow", "extension", "horovod", "dali", "cudnn", "cublas", "nccl"} <= {
        b["component"] for b in binaries
    }
    for b in binaries:
        assert b["our_entries"] == b["cuobjdump_entries"], b  # every ELF and PTX entry, no more
        if b["no_kernels"]:  # an empty module only: listed, not counted
            assert b["ours"] == [[], []] and b["cuobjdump"][0], b
        else:
            assert b["ours"] == b["cuobjdump"], b
    assert result["took"] < 30, result["took"]  # headers only: seconds, where cuobjdump takes minutes
