#!/usr/bin/env python3
"""Build-performance benchmark: one command, a table on stdout, JSON in bench/results/.

    python3 bench/run.py [--skip-base] [--runs N] [--push] [--only render,base,build,cnn,size]

Figures (each records the command that produced it; ratios are taken within one run,
because absolute times on a shared 2-core machine mean little on their own):
  render        `builder render --all` and `builder --help` wall time (median of N)
  base          offline base build (`builder base --rebuild`), and the no-op repeat
  cold          `builder build --no-cache` of 21.08 tf2 on the existing base, seeding an
                empty compile cache; split by Dockerfile step (toolchain, locked wheels,
                Horovod, extension) and by nvbuild.sh's own phase timings
  noop          the same build again, nothing changed
  env-only      a build changing one env default: must not recompile anything
  patch         one-file patch to the extension (to an op's arithmetic, csrc/cpu/, and to
                its registration, csrc/ops/) and to Horovod, rebuilt through the warm
                cache: compile seconds against the cold compile of the same part
  cnn           the CNN example's images/sec in the image against the same locked wheels
                in a plain virtual environment on the host (same Python, same run)
  size          image size, layer count, bytes wasted (package lists, caches, build
                trees, files written in one layer and deleted or replaced in a later one)
  push          (--push) the release image and a derived one to a local registry
  layercache    (--only layercache; it wipes the engine's whole build cache) a cold
                build, the same build writing `--layer-cache` to a local registry, and a
                rebuild from that registry after `docker builder prune -af` and the image
                removed: the second machine's first build, against cold
  compression   (--only compression) 5 GB of new layers (the release image's Python
                packages and libraries on the Debian root) built and exported with gzip
                (the default) and with zstd, each then pushed to a local registry:
                seconds, MB/s, bytes stored, zstd's total against gzip's; plus the
                release image pushed as it is stored
  runtime       (--only runtime; it empties the engine's build cache) 26.11 cold to a
                runtime image: `builder build --release 26.11 --runtime-only` (base
                included; the devel stage built, never exported) against the plain
                Dockerfile a user would write instead (`pip install
                tensorflow[and-cuda]==2.21.0` on the same Debian 13 root file system),
                each from an empty build cache, with the peak disk above the start of
                each (sampled every second), sizes and the ratio; RUNTIME_BUILD=both
                measures `--runtime` (devel and runtime images) instead
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO = "bench/tensorflow"
RELEASE, VARIANT = "21.08", "tf2-py3"
IMAGE = f"{REPO}:{RELEASE}-{VARIANT}"
# Bytecode caches (__pycache__/*.pyc, written by pip and Debian's postinst at install) are
# not waste: without them every container compiles each module on import again. They are
# reported on their own line.
BYTECODE = r"(^|/)__pycache__/.+\.pyc$"
WASTE_PATTERNS = (
    r"^var/lib/apt/lists/.+",
    r"^var/cache/apt/.+\.bin$",
    r"^var/cache/apt/archives/.+\.deb$",
    r"^root/\.cache/.+",
    r"^tmp/.+",
    r"^opt/tensorflow/tensorflow-source/build/.+",
)
HOST_PYTHON = "/root/.pyenv/versions/3.9.18/bin/python3"  # the image's Python minor, for the host venv
HVD_UNIT = "horovod/common/operations.cc"
# Not counted: /usr/share/doc (packages' copyright files, which Debian requires to ship).


def sh(cmd: list[str], env: dict | None = None, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - start
    if check and out.returncode != 0:
        raise SystemExit(f"bench: `{' '.join(cmd)}` failed:\n{out.stderr[-3000:]}")
    return seconds, out


def median_time(cmd: list[str], runs: int) -> float:
    return statistics.median(sh(cmd)[0] for _ in range(runs))


def log_path(cache: Path, name: str) -> Path:
    return cache / "logs" / name


def phase_seconds(log: str, phase: str) -> float:
    """nvbuild.sh's own timing line for a phase: `nvbuild.sh: <phase> took 12.34s`."""
    m = re.findall(rf"nvbuild.sh: {re.escape(phase)} took ([\d.]+)s", log)
    if not m:
        raise SystemExit(f"bench: no 'nvbuild.sh: {phase} took' line in the build log")
    return float(m[-1])


def step_seconds(log: str) -> list[tuple[str, float]]:
    """(instruction, seconds) per Dockerfile step: BuildKit's own durations where the log
    has them (`#builder-done N/M at Ts (Ds): TEXT`), else the time between step markers."""
    done = re.findall(r"^#builder-done \d+/\d+ at [\d.]+s \(([\d.]+)s\): (.*)$", log, re.M)
    if done:
        return [(text, float(sec)) for sec, text in done]
    # BuildKit: "#builder-step N/M at Xs: TEXT"; legacy: "#builder-step N/M at Xs" and "Step N/M : TEXT"
    found = list(re.finditer(r"^#builder-step (\d+)/\d+ at ([\d.]+)s(?:: (.*))?$", log, re.M))
    if not found:
        raise SystemExit("bench: the build log has no '#builder-step' markers to split the build by")
    texts = dict(re.findall(r"^Step (\d+)/\d+ : (.*)$", log, re.M))
    marks = [(float(m.group(2)), m.group(3) or texts.get(m.group(1), "?")) for m in found]
    out = []
    for i, (start, text) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else start
        out.append((text, end - start))
    return out


# How the figures find their Dockerfile step: each needle is in exactly one RUN of the
# release Dockerfile, the builder's own mounts left out (a unit test holds them to it).
STEP = {
    "toolchain": "apt-get install",
    "wheels": "requirements-py",
    "horovod": "--only horovod",
    "extension": "RUN ./nvbuild.sh --sm",
}


def vertex_seconds(log: str, name: str) -> float:
    """BuildKit's own duration of a vertex that is not a Dockerfile step (e.g. "exporting to image")."""
    return sum(float(s) for s in re.findall(rf"^#builder-done at [\d.]+s \(([\d.]+)s\): {re.escape(name)}$", log, re.M))


def steps_matching(steps: list[tuple[str, float]], needle: str) -> float:
    return sum(sec for text, sec in steps if needle in text)


# The extension's two kinds of unit: an op's arithmetic (Eigen's headers only, what a fix
# to a kernel's math touches) and its registration (REGISTER_OP, the kernel class: it
# reads TensorFlow's framework headers, whose parse is that unit's floor).
ARITHMETIC_UNIT, REGISTRATION_UNIT = "csrc/cpu/bias_relu.cc", "csrc/ops/bias_relu.cc"


def marker_patch(value: int, unit: str = ARITHMETIC_UNIT) -> str:
    src = (ROOT / "framework-src" / unit).read_text().splitlines()
    n = len(src)
    body = [f" {t}" for t in src[-3:]] + ["+", f'+extern "C" int tfext_patch_marker(void) {{ return {value}; }}']
    return "\n".join([f"--- a/{unit}", f"+++ b/{unit}", f"@@ -{n - 2},3 +{n - 2},5 @@", *body]) + "\n"


def horovod_patch(image: str, value: int) -> str:
    out = sh(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "bash",
            image,
            "-c",
            "cd /tmp && cp -r /opt/tensorflow/horovod-source h && cd h && "
            "for p in /opt/tensorflow/patches/horovod/*.patch; do patch -s -p1 < $p; done && cat " + HVD_UNIT,
        ]
    )[1]
    src = out.stdout.splitlines()
    n = len(src)
    body = [f" {t}" for t in src[-3:]] + ["+", f'+extern "C" int horovod_bench_marker(void) {{ return {value}; }}']
    return "\n".join([f"--- a/{HVD_UNIT}", f"+++ b/{HVD_UNIT}", f"@@ -{n - 2},3 +{n - 2},5 @@", *body]) + "\n"


def images_per_sec(out: str) -> float:
    m = re.search(r"^total images/sec: ([\d.]+)$", out, re.M)
    if not m:
        raise SystemExit(f"bench: the CNN example printed no images/sec:\n{out[-2000:]}")
    return float(m.group(1))


def cnn_figures(figure, image: str, runs: int) -> dict:
    """The CNN example in the image and in a host venv holding the same locked wheels."""
    venv = Path(tempfile.mkdtemp(prefix="bench-venv-")) / "venv"
    lock = sh(["docker", "run", "--rm", "--entrypoint", "cat", image, "/opt/tensorflow/locks/requirements-py3.9.txt"])[
        1
    ].stdout
    (venv.parent / "lock.txt").write_text(lock)
    sh([HOST_PYTHON, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    sh([py, "-m", "pip", "install", "-q", "setuptools<70", "wheel"])
    t_install, _ = sh(
        [
            py,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--require-hashes",
            "--no-build-isolation",
            "-r",
            str(venv.parent / "lock.txt"),
        ]
    )
    examples = ROOT / "templates" / "nvidia-examples" / "cnn"
    results = {}
    for label, flags in (
        ("small_cnn", "--model small_cnn --batch_size 32 --num_iter 40 --warmup 5"),
        ("resnet50", "--model resnet50 --batch_size 8 --num_iter 4 --warmup 1"),
    ):
        image_runs, host_runs = [], []
        for _ in range(runs):  # alternate, so drift in the machine's load hits both alike
            _, out = sh(
                [
                    "docker",
                    "run",
                    "--rm",
                    "--entrypoint",
                    "bash",
                    image,
                    "-c",
                    f"cd /workspace/nvidia-examples/cnn && TF_CPP_MIN_LOG_LEVEL=2 python3 cnn.py {flags}",
                ]
            )
            image_runs.append(images_per_sec(out.stdout))
            _, out = sh(["bash", "-c", f"cd {examples} && TF_CPP_MIN_LOG_LEVEL=2 {py} cnn.py {flags}"])
            host_runs.append(images_per_sec(out.stdout))
        img, host = statistics.median(image_runs), statistics.median(host_runs)
        figure(
            f"CNN {label}: images/sec in the image",
            round(img, 1),
            "img/s",
            f"python cnn.py {flags}",
            f"median of {runs}",
        )
        figure(
            f"CNN {label}: images/sec, host venv",
            round(host, 1),
            "img/s",
            f"{HOST_PYTHON} -m venv + the image's lock; python cnn.py {flags}",
            f"median of {runs}",
        )
        figure(f"CNN {label}: image / host", f"{img / host:.2f}", "", "same run", "target >= 0.95")
        results[label] = {"image": image_runs, "host": host_runs}
    import shutil

    shutil.rmtree(venv.parent, ignore_errors=True)
    return results


def image_report(image: str) -> dict:
    """Size, layers, and bytes that sit in the image without being of use."""
    inspect = json.loads(sh(["docker", "image", "inspect", image])[1].stdout)[0]
    with tempfile.TemporaryDirectory() as tmp:
        tar_path = Path(tmp) / "image.tar"
        sh(["docker", "save", "-o", str(tar_path), image])
        final: dict[str, tuple[int, int]] = {}  # path -> (layer index, size) of its last writer
        shadowed = content = 0
        with tarfile.open(tar_path) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))[0]
            for index, layer_path in enumerate(manifest["Layers"]):
                with tarfile.open(fileobj=io.BytesIO(outer.extractfile(layer_path).read())) as layer:
                    for m in layer.getmembers():
                        name = m.name.lstrip("./")
                        base = os.path.basename(name)
                        if base.startswith(".wh."):
                            target = os.path.join(os.path.dirname(name), base[4:])
                            for p in [p for p in final if p == target or p.startswith(target + "/")]:
                                shadowed += final.pop(p)[1]
                            continue
                        if m.isfile():
                            content += m.size
                            if name in final:
                                shadowed += final[name][1]
                            final[name] = (index, m.size)
    junk = sum(size for path, (_, size) in final.items() if any(re.search(p, path) for p in WASTE_PATTERNS))
    bytecode = sum(size for path, (_, size) in final.items() if re.search(BYTECODE, path))
    # The files' bytes over all layers, not inspect's Size: on the containerd store that is
    # the compressed blobs' size, which would make the fractions incomparable across stores.
    return {
        "image": image,
        "size_bytes": content,
        "stored_bytes": inspect["Size"],
        "layers": len(inspect["RootFS"]["Layers"]),
        "wasted_shadowed_bytes": shadowed,
        "wasted_junk_bytes": junk,
        "bytecode_bytes": bytecode,
        "wasted_fraction": round((shadowed + junk) / content, 5),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_registry():
    """(host, storage directory) of a plain-HTTP registry on loopback, removed after."""
    root = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    host = f"127.0.0.1:{free_port()}"
    (root / "config.yml").write_text(
        f"version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: "
        f"{{rootdirectory: {root}/data}}\nhttp:\n  addr: {host}\n"
    )
    registry = subprocess.Popen(
        ["/usr/bin/docker-registry", "serve", str(root / "config.yml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1)
        yield host, root / "data"
    finally:
        registry.terminate()
        registry.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def layer_cache_figures(figure, cache: Path) -> None:
    """The registry layer cache: what writing it costs, and what a machine with no build
    cache gains from it (this engine after `docker builder prune -af`, the image removed,
    the base kept: a second machine would pull the base as it pulls any base image)."""
    build = ["builder", "build", "--release", RELEASE, "--variant", VARIANT, "--repo", REPO, "-q"]
    with local_registry() as (host, storage):
        repo = f"{host}/tf-cache"
        made: set[str] = set()  # every image this section makes: each pins its layers' blobs

        def image_now() -> str:
            made.add(json.loads(sh(["docker", "image", "inspect", IMAGE])[1].stdout)[0]["Id"])
            return IMAGE

        sh(["docker", "builder", "prune", "-af"])
        t_cold, _ = sh(build + ["--build-id", "lc-cold"])
        image_now()
        figure(
            "layer cache: cold build (no cache at all)",
            round(t_cold, 1),
            "s",
            " ".join(build[:-1]) + "  (after docker builder prune -af)",
        )
        t_noop, _ = sh(build + ["--build-id", "lc-cold"])
        image_now()
        t_write, _ = sh(build + ["--build-id", "lc-cold", "--layer-cache", repo])
        image_now()
        write_log = log_path(cache, f"{RELEASE}-{VARIANT}-lc-cold.log").read_text()
        export = vertex_seconds(write_log, "exporting cache to registry")
        stored = sum(p.stat().st_size for p in storage.rglob("*") if p.is_file())
        figure(
            "layer cache: the same build, writing the cache",
            round(t_write, 1),
            "s",
            " ".join(build[:-1]) + f" --layer-cache {repo}",
            f"no-op rebuild without it {t_noop:.1f}s; exporting the cache {export:.1f}s; "
            f"{stored / 1e9:.2f} GB in the registry",
        )
        sh(["docker", "builder", "prune", "-af"])
        # A machine that never built it: no build cache, and none of the images this run
        # made (an image whose tag moved stays as <none> and keeps its layers' blobs in the
        # content store, which BuildKit then finds without downloading anything).
        for tag in json.loads(sh(["docker", "image", "inspect", IMAGE])[1].stdout)[0]["RepoTags"]:
            sh(["docker", "rmi", tag], check=False)
        for image_id in made:
            sh(["docker", "rmi", image_id], check=False)
        t_from, _ = sh(build + ["--build-id", "lc-cold", "--layer-cache", repo])
        log = log_path(cache, f"{RELEASE}-{VARIANT}-lc-cold.log").read_text()
        ran = len(re.findall(r"^#builder-step \d+/\d+ at [\d.]+s: RUN ", log, re.M))
        cached = len([line for line in log.splitlines() if line.startswith("#builder-cached ") and ": RUN " in line])
        figure(
            "layer cache: rebuild on a wiped build cache",
            round(t_from, 1),
            "s",
            " ".join(build[:-1]) + f" --layer-cache {repo}  (after docker builder prune -af, image removed)",
            f"{cached} of {ran} RUN steps from the registry",
        )
        figure("layer cache: rebuild / cold", f"{t_from / t_cold:.1%}", "", "same run", "")
        second_engine_figures(figure, cache, build, repo, host, t_cold)


def second_engine_figures(figure, cache: Path, build: list[str], repo: str, host: str, t_cold: float) -> None:
    """The same build on a second Docker engine (--builder, a Docker context): an empty
    engine in the host's network namespace that pulls the base from the registry, builds
    from the registry layer cache, and hands the image back to this engine as an archive."""
    sys.path.insert(0, str(ROOT))
    from tests.integration.engines import second_engine

    base = sh(["builder", "base", "--release", RELEASE, "-q"])[1].stdout.strip()
    remote_base = f"{host}/base/{base.split('/', 1)[1]}"
    sh(["docker", "tag", base, remote_base])
    sh(["docker", "push", "-q", remote_base])
    with second_engine({"features": {"containerd-snapshotter": True}}, in_host_netns=True) as env:
        t_pull, _ = sh(["docker", "pull", "-q", remote_base], env=env)
        sh(["docker", "tag", remote_base, base], env=env)
        here = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        here["DOCKER_CONFIG"] = tempfile.mkdtemp(prefix="bench-docker-config-")
        sh(["docker", "context", "create", "bench-e2", "--docker", f"host={env['DOCKER_HOST']}"], env=here)
        t_e2, _ = sh(
            build + ["--build-id", "lc-e2", "--tag", f"{REPO}:from-e2", "--builder", "bench-e2", "--layer-cache", repo],
            env=here,
        )
        shutil.rmtree(here["DOCKER_CONFIG"], ignore_errors=True)
    log = log_path(cache, f"{RELEASE}-{VARIANT}-lc-e2.log").read_text()
    ran = len(re.findall(r"^#builder-step \d+/\d+ at [\d.]+s: RUN ", log, re.M))
    cached = len([line for line in log.splitlines() if line.startswith("#builder-cached ") and ": RUN " in line])
    figure(
        "second engine (--builder): build from the registry cache",
        round(t_e2, 1),
        "s",
        " ".join(build[:-1]) + f" --builder bench-e2 --layer-cache {repo}",
        f"{cached} of {ran} RUN steps from the registry; image loaded back here; base pull before: {t_pull:.1f}s",
    )
    figure("second engine build / cold", f"{t_e2 / t_cold:.1%}", "", "same run", "")


def registry_bytes(host: str, repo: str, tag: str) -> int:
    """The compressed bytes of an image's layers as the registry holds them (its manifest)."""
    accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
    req = urllib.request.Request(f"http://{host}/v2/{repo}/manifests/{tag}", headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=30) as r:
        return sum(layer["size"] for layer in json.load(r)["layers"])


def compression_figures(figure, cache: Path) -> None:
    """New layers compressed with gzip and with zstd at export, then pushed: on the
    containerd store compression happens at export, and a push uploads stored blobs.
    The layers: the release image's Python packages and libraries copied onto the Debian
    root, built with --no-cache each time (so each export compresses them afresh)."""
    with local_registry() as (host, _), tempfile.TemporaryDirectory(prefix="bench-compress-") as ctx:
        as_stored = f"{host}/bench/stored:x"
        sh(["docker", "tag", IMAGE, as_stored])
        t, _ = sh(["docker", "push", "-q", as_stored])
        stored = registry_bytes(host, "bench/stored", "x")
        figure(
            "push of the release image as stored",
            round(t, 1),
            "s",
            f"docker push {as_stored}",
            f"{stored / 1e9:.2f} GB at {stored / 1e6 / t:.0f} MB/s (no compression at push)",
        )
        sh(["docker", "rmi", as_stored])
        rootfs = json.loads(sh(["docker", "image", "inspect", IMAGE])[1].stdout)[0]["Config"]["Labels"].get(
            "dev.tfbuilder.base.debian", "bullseye"
        )
        Path(ctx, "Dockerfile").write_text(
            f"FROM {IMAGE} AS src\nFROM local/debian-rootfs:{rootfs}\n"
            "COPY --from=src /usr/local/lib/python3.9 /usr/local/lib/python3.9\n"
            "COPY --from=src /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu\n"
        )
        totals = {}
        for comp in ("gzip", "zstd"):
            name = f"bench/compress:{comp}"
            t_export, _ = sh(
                [
                    "docker",
                    "buildx",
                    "build",
                    "--no-cache",
                    "--provenance=false",
                    "--sbom=false",
                    "--output",
                    f"type=docker,name={name},compression={comp},force-compression=true",
                    ctx,
                ]
            )
            ref = f"{host}/{name}"
            sh(["docker", "tag", name, ref])
            t_push, _ = sh(["docker", "push", "-q", ref])
            size = registry_bytes(host, "bench/compress", comp)
            totals[comp] = t_export + t_push
            figure(
                f"  {comp}: build + export of the new layers",
                round(t_export, 1),
                "s",
                f"docker buildx build --no-cache --output type=docker,compression={comp},force-compression=true",
            )
            figure(
                f"  {comp}: push",
                round(t_push, 1),
                "s",
                f"docker push {ref}",
                f"{size / 1e9:.2f} GB stored, {size / 1e6 / t_push:.0f} MB/s (the Debian root's layer is "
                "skipped by the second push)",
            )
            sh(["docker", "rmi", ref, name])
        figure(
            "zstd build + export + push against gzip's",
            round(totals["zstd"] / totals["gzip"], 3),
            "",
            "the rows above",
            f"{totals['gzip']:.1f} s with gzip, {totals['zstd']:.1f} s with zstd",
        )


PLAIN_2611 = """FROM local/debian-rootfs:trixie
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      ca-certificates python3 python3-pip && rm -rf /var/lib/apt/lists/*
RUN --mount=type=secret,id=ca PIP_CERT=/run/secrets/ca pip install --no-cache-dir --break-system-packages \\
      "tensorflow[and-cuda]==2.21.0"
"""


@contextlib.contextmanager
def disk_peak(path: str = "/var/lib/docker"):
    """{'peak': bytes used above the start} while the block runs, sampled every second."""
    import threading

    start = shutil.disk_usage(path).used
    seen = {"peak": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            seen["peak"] = max(seen["peak"], shutil.disk_usage(path).used - start)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()
        seen["peak"] = max(seen["peak"], shutil.disk_usage(path).used - start)


def runtime_figures(figure, cache: Path) -> None:
    """26.11 cold to a runtime image, the builder against a plain Dockerfile; both start
    from the same Debian 13 root file system and an empty build cache, gzip layers both."""
    from builder import catalog
    from builder.render.base_recipe import BaseRecipe

    recipe = BaseRecipe.for_release(catalog.load().get("26.11"))
    if subprocess.run(["docker", "image", "inspect", recipe.rootfs_image], capture_output=True).returncode:
        sh(["builder", "base", "--release", "26.11", "-q"])  # debootstrap: the root file system both start from
    repo, plain = "bench/tf2611", "bench/plain2611:x"
    refs = [f"{repo}:26.11-tf2-py3{s}" for s in ("", "-cold", "-runtime", "-cold-runtime")]

    def empty() -> None:
        subprocess.run(["docker", "rmi", *refs, plain, recipe.tag], capture_output=True)
        sh(["docker", "builder", "prune", "-af"])

    empty()
    with tempfile.TemporaryDirectory(prefix="bench-plain-") as ctx:
        Path(ctx, "Dockerfile").write_text(PLAIN_2611)
        cmd = [
            "docker",
            "buildx",
            "build",
            "--provenance=false",
            "--sbom=false",
            "--secret",
            "id=ca,src=/etc/ssl/certs/ca-certificates.crt",
            "--output",
            f"type=docker,name={plain}",
            ctx,
        ]
        with disk_peak() as plain_disk:
            t_plain, _ = sh(cmd)
    plain_size = int(sh(["docker", "image", "inspect", "--format", "{{.Size}}", plain])[1].stdout)
    figure(
        "26.11 plain Dockerfile, cold",
        round(t_plain, 1),
        "s",
        "docker buildx build (bench/run.py PLAIN_2611)",
        f"pip install tensorflow[and-cuda]==2.21.0; {plain_size / 1e9:.2f} GB stored; "
        f"peak disk +{plain_disk['peak'] / 1e9:.1f} GB",
    )
    empty()
    both = os.environ.get("RUNTIME_BUILD") == "both"
    build = [
        "builder",
        "build",
        "--release",
        "26.11",
        "--runtime" if both else "--runtime-only",
        "--base",
        "offline",
        "--repo",
        repo,
        "--build-id",
        "cold",
        "--no-sbom",
        "-q",
    ]
    with disk_peak() as ours_disk:
        t_ours, _ = sh(build)
    made = [r for r in refs if subprocess.run(["docker", "image", "inspect", r], capture_output=True).returncode == 0]
    sizes = ", ".join(
        f"{r.split(':')[1]} {int(sh(['docker', 'image', 'inspect', '--format', '{{.Size}}', r])[1].stdout) / 1e9:.2f} GB"
        for r in made
        if "-cold" not in r
    )
    what = "devel + runtime" if both else "runtime only"
    figure(
        f"26.11 builder, cold to {what}",
        round(t_ours, 1),
        "s",
        " ".join(build),
        f"base, wheels, toolkit, compile, read-back; peak disk +{ours_disk['peak'] / 1e9:.1f} GB; stored: {sizes}",
    )
    figure(
        f"26.11 builder ({what}) against the plain Dockerfile",
        round(t_ours / t_plain, 2),
        "",
        "the rows above",
        "target <= 1.5",
    )
    empty()


def push_figures(figure, cache: Path) -> None:
    """Push the release image, then a derived one: what does the second upload?"""
    with local_registry() as (host, _):
        t_parent, out = sh(["builder", "push", IMAGE, "--registry", host, "--insecure-registry", "--json", "-q"])
        parent = json.loads(out.stdout)
        derived = f"{REPO}:with-jq"
        sh(["builder", "derive", "--from", IMAGE, "--apt", "jq", "--tag", derived, "--no-test", "-q"])
        t_derived, out = sh(["builder", "push", derived, "--registry", host, "--insecure-registry", "--json", "-q"])
        pushed = json.loads(out.stdout)
        n_parent = len(json.loads(sh(["docker", "image", "inspect", IMAGE])[1].stdout)[0]["RootFS"]["Layers"])
        sizes = (
            json.loads(sh(["docker", "image", "inspect", derived])[1].stdout)[0]["Size"]
            - json.loads(sh(["docker", "image", "inspect", IMAGE])[1].stdout)[0]["Size"]
        )
        figure(
            "push of the release image",
            round(t_parent, 1),
            "s",
            f"builder push {IMAGE} --registry {host}",
            f"{parent['bytes_uploaded'] / 1e6:.0f} MB in {parent['layers_pushed']} layers",
        )
        figure(
            "push of a derived image after its parent",
            round(t_derived, 1),
            "s",
            f"builder push {derived} --registry {host}",
            f"uploaded {pushed['bytes_uploaded'] / 1e6:.2f} MB (as the engine counts it) in {pushed['layers_pushed']} layers "
            f"for {sizes / 1e6:.2f} MB of new layers (as stored); skipped {pushed['layers_skipped']} "
            f"of the parent's {n_parent}",
        )


def build_figures(figure, cache: Path, runs: int) -> None:
    """Cold build (split by step and phase), no-op and env-only rebuilds, both patch ratios."""
    build = ["builder", "build", "--release", RELEASE, "--variant", VARIANT, "--repo", REPO, "-q"]
    cache_dir = cache / "compile-cache"
    _, served = sh(["builder", "cache", "serve", "--detach", "--dir", str(cache_dir), "--port", str(free_port())])
    url = served.stdout.strip() + "/ccache"
    try:
        # Cold means cold: BuildKit's cache mounts (nvbuild.sh's ccache) outlive --no-cache.
        sh(["docker", "builder", "prune", "-f", "--filter", "type=exec.cachemount"])
        t_cold, _ = sh(build + ["--build-id", "cold", "--no-cache", "--compile-cache", url])
        cold_log = log_path(cache, f"{RELEASE}-{VARIANT}-cold.log").read_text()
        steps = step_seconds(cold_log)
        ext_cold = phase_seconds(cold_log, "compile phase")
        hvd_cold = phase_seconds(cold_log, "horovod compile phase")
        figure(
            "cold build of 21.08 tf2 on the base",
            round(t_cold, 1),
            "s",
            " ".join(build[:-1] + ["--no-cache", "--compile-cache", url]),
            "target < 900 s; empty compile cache",
        )
        figure("  toolchain (apt)", round(steps_matching(steps, STEP["toolchain"]), 1), "s", "Dockerfile step")
        figure(
            "  locked wheels (TensorFlow, cuDNN, NCCL, ...)",
            round(steps_matching(steps, STEP["wheels"]), 1),
            "s",
            "Dockerfile step: pip install -r requirements-py*.txt (the lock)",
        )
        figure(
            "  Horovod step",
            round(steps_matching(steps, STEP["horovod"]), 1),
            "s",
            "Dockerfile step: nvbuild.sh --only horovod",
            f"compile phase {hvd_cold:.1f}s",
        )
        figure(
            "  extension step",
            round(steps_matching(steps, STEP["extension"]), 1),
            "s",
            "Dockerfile step: nvbuild.sh",
            f"compile phase {ext_cold:.1f}s",
        )
        figure(
            "  outside the steps",
            round(t_cold - sum(sec for _, sec in steps), 1),
            "s",
            "context upload, image export, read-back check (image_report.py), labels",
            "total minus the Dockerfile steps",
        )
        figure(
            "    of which exporting to image",
            round(vertex_seconds(cold_log, "exporting to image"), 1),
            "s",
            "BuildKit's 'exporting to image'",
            "the containerd store compresses each new layer (gzip)",
        )

        t_warm, _ = sh(build + ["--build-id", "warm", "--no-cache", "--compile-cache", url])
        warm_steps = step_seconds(log_path(cache, f"{RELEASE}-{VARIANT}-warm.log").read_text())
        figure(
            "--no-cache rebuild, warm compile cache",
            round(t_warm, 1),
            "s",
            " ".join(build[:-1] + ["--no-cache", "--compile-cache", url]) + " (again)",
            f"{t_warm / t_cold:.0%} of cold",
        )
        for name, key in (("Horovod", "horovod"), ("extension", "extension"), ("locked wheels", "wheels")):
            figure(
                f"  {name} step, warm",
                round(steps_matching(warm_steps, STEP[key]), 1),
                "s",
                "Dockerfile step",
                f"cold {steps_matching(steps, STEP[key]):.1f}s",
            )

        t_noop = statistics.median(sh(build + ["--build-id", "cold", "--compile-cache", url])[0] for _ in range(runs))
        figure(
            "no-op rebuild, median",
            round(t_noop, 2),
            "s",
            " ".join(build[:-1]) + " (again)",
            f"{t_noop / t_cold:.1%} of cold; target <= 3%",
        )

        t_env, _ = sh(build + ["--build-id", "envonly", "--env", "TF_AUTOTUNE_THRESHOLD=1", "--compile-cache", url])
        env_log = log_path(cache, f"{RELEASE}-{VARIANT}-envonly.log").read_text()
        recompiled = "nvbuild.sh: compile phase took" in env_log or "horovod compile phase took" in env_log
        figure(
            "env-default change only",
            round(t_env, 2),
            "s",
            " ".join(build[:-1]) + " --env TF_AUTOTUNE_THRESHOLD=1",
            "recompiled: " + ("YES (target missed)" if recompiled else "nothing"),
        )

        work = Path(tempfile.mkdtemp())
        (work / "one-file.patch").write_text(marker_patch(random.randint(1, 10**9)))
        (work / "registration.patch").write_text(marker_patch(random.randint(1, 10**9), REGISTRATION_UNIT))
        (work / "0100-bench.patch").write_text(horovod_patch(IMAGE, random.randint(1, 10**9)))
        for what, option, patch, phase, cold, target in (
            ("extension", "--patch", "one-file.patch", "compile phase", ext_cold, "5%"),
            (
                "extension registration",
                "--patch",
                "registration.patch",
                "compile phase",
                ext_cold,
                "5% (floor: the unit's parse of TensorFlow's headers)",
            ),
            ("Horovod", "--horovod-patch", "0100-bench.patch", "horovod compile phase", hvd_cold, "15%"),
        ):
            tag = f"{REPO}:patch-{what.lower().replace(' ', '-')}"
            t, _ = sh(
                [
                    "builder",
                    "derive",
                    "--from",
                    IMAGE,
                    option,
                    str(work / patch),
                    "--tag",
                    tag,
                    "--no-test",
                    "-q",
                    "--compile-cache",
                    url,
                ]
            )
            log = log_path(cache, f"derive-{tag.replace('/', '_').replace(':', '_')}.log").read_text()
            warm, units = phase_seconds(log, phase), re.findall(r"nvbuild.sh: compiled: (\S+)", log)
            figure(
                f"one-file {what} patch, warm cache: compile",
                round(warm, 2),
                "s",
                f"builder derive --from {IMAGE} {option} {patch} --compile-cache URL",
                f"whole derive {t:.1f}s; compiled: {', '.join(units) or 'nothing'}",
            )
            figure(
                f"{what} patch ratio (warm / cold compile)", f"{warm / cold:.1%}", "", "same run", f"target <= {target}"
            )
        local_cache_figures(figure, cache, work)
        stats = json.loads(sh(["builder", "cache", "stats", "--dir", str(cache_dir), "--json"])[1].stdout)
        figure(
            "compile cache hit rate over the run",
            f"{stats['hit_rate']:.0%}",
            "",
            "builder cache stats",
            f"{stats['hits']} hits / {stats['lookups']} lookups",
        )
    finally:
        sh(["builder", "cache", "stop", "--dir", str(cache_dir)], check=False)


def local_cache_figures(figure, cache: Path, work: Path) -> None:
    """One-file extension patches with no compile-cache server: the first after emptying
    BuildKit's cache mounts compiles everything into the mount, the second only its unit."""
    sh(["docker", "builder", "prune", "-f", "--filter", "type=exec.cachemount"])
    compile_s = []
    for n in range(2):
        (work / f"local{n}.patch").write_text(marker_patch(random.randint(1, 10**9)))
        tag = f"{REPO}:patch-local{n}"
        t, _ = sh(
            [
                "builder",
                "derive",
                "--from",
                IMAGE,
                "--patch",
                str(work / f"local{n}.patch"),
                "--tag",
                tag,
                "--no-test",
                "-q",
            ]
        )
        log = log_path(cache, f"derive-{tag.replace('/', '_').replace(':', '_')}.log").read_text()
        compile_s.append(phase_seconds(log, "compile phase"))
        units = re.findall(r"nvbuild.sh: compiled: (\S+)", log)
        figure(
            f"one-file extension patch, local cache mount {'empty' if n == 0 else 'warm'}: compile",
            round(compile_s[-1], 2),
            "s",
            f"builder derive --from {IMAGE} --patch local{n}.patch (no --compile-cache)",
            f"whole derive {t:.1f}s; {len(units)} units compiled",
        )
    figure(
        "extension patch ratio, local cache mount (warm / empty)",
        f"{compile_s[1] / compile_s[0]:.1%}",
        "",
        "same run",
        "no server: BuildKit's RUN --mount=type=cache",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of the short measurements (median)")
    ap.add_argument("--skip-base", action="store_true", help="do not rebuild the offline base")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--push", action="store_true", help="also measure pushes to a local registry")
    ap.add_argument(
        "--only",
        default="render,base,build,cnn,size",
        help="comma-separated sections to run (render, base, build, cnn, size); cnn and size "
        f"measure the existing {IMAGE}",
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    unknown = only - {"render", "base", "build", "cnn", "size", "layercache", "compression", "runtime"}
    if unknown:
        ap.error(f"unknown --only section(s): {', '.join(sorted(unknown))}")
    cache = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    env = {"BUILDER_CACHE_DIR": str(cache)}
    os.environ.update(env)
    results: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "docker": sh(["docker", "version", "--format", "{{.Server.Version}}"])[1].stdout.strip(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "figures": [],
    }

    def figure(name: str, value, unit: str, command: str, note: str = "") -> None:
        results["figures"].append({"name": name, "value": value, "unit": unit, "command": command, "note": note})
        print(f"{name:<44} {value!s:>12} {unit:<8} {note}", flush=True)

    print(f"{'figure':<44} {'value':>12} {'unit':<8} note")
    if "render" in only:
        figure(
            "cli start-up (builder --help), median",
            round(median_time(["builder", "--help"], args.runs), 3),
            "s",
            "builder --help",
            "target < 0.3 s",
        )
        figure(
            "render all Dockerfiles, median",
            round(median_time(["builder", "render", "--all", "--check"], args.runs), 3),
            "s",
            "builder render --all --check",
        )

    if "base" in only and not args.skip_base:
        t, _ = sh(["builder", "base", "--release", RELEASE, "--rebuild", "-q"])
        figure(
            "offline base build (debootstrap + CUDA)", round(t, 1), "s", f"builder base --release {RELEASE} --rebuild"
        )
    if "base" in only:
        noop_base = median_time(["builder", "base", "--release", RELEASE, "-q"], args.runs)
        figure(
            "offline base, asked again (no-op), median",
            round(noop_base, 3),
            "s",
            f"builder base --release {RELEASE}",
            "target < 1 s",
        )
    if "build" in only:
        build_figures(figure, cache, args.runs)
    if "cnn" in only:
        results["cnn"] = cnn_figures(figure, IMAGE, max(3, args.runs // 2 + 1))
    if args.push:
        push_figures(figure, cache)
    if "layercache" in only:
        layer_cache_figures(figure, cache)
    if "compression" in only:
        compression_figures(figure, cache)
    if "runtime" in only:
        runtime_figures(figure, cache)
    if "size" in only:
        report = image_report(IMAGE)
        figure(
            "image size",
            round(report["size_bytes"] / 1e9, 2),
            "GB",
            "bench/run.py image_report (docker save)",
            "the files' bytes in all layers",
        )
        figure(
            "image size as stored",
            round(report["stored_bytes"] / 1e9, 2),
            "GB",
            f"docker image inspect {IMAGE}",
            "compressed layers on the containerd store",
        )
        figure("layers", report["layers"], "", f"docker image inspect {IMAGE}")
        figure(
            "bytes wasted",
            f"{report['wasted_fraction']:.2%}",
            "",
            "bench/run.py image_report (docker save)",
            f"{(report['wasted_shadowed_bytes'] + report['wasted_junk_bytes']) / 1e6:.1f} MB; target < 1%",
        )
        figure(
            "bytecode caches (kept, not waste)",
            round(report["bytecode_bytes"] / 1e6, 1),
            "MB",
            "bench/run.py image_report (docker save)",
            "__pycache__/*.pyc written at install",
        )
        results["image"] = report

    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
