#!/usr/bin/env python3
"""Build-performance benchmark: one command, a table on stdout, JSON in bench/results/.

    python3 bench/run.py [--quick] [--skip-base] [--runs N]

Figures (each records the command that produced it; ratios are taken within one run,
because absolute times on a shared 2-core machine mean little on their own):
  render        `builder render --all` and `builder --help` wall time (median of N)
  base          offline base build (`builder base --rebuild`), and the no-op repeat
  cold          `builder build --no-cache` of 21.08 tf2 on the existing base, split into
                framework compile (nvbuild.sh's compile phase) and the rest
  noop          the same build again, nothing changed
  env-only      a build changing one env default: must not recompile the framework
  patch         one-file patch rebuilt: through a warm shared compile cache, and the
                NGC way (no cache: full recompile); compile-phase seconds and ratio
  push          a derived image pushed after its parent: bytes uploaded against the size
                of its new layers (Debian's docker-registry on loopback)
  size          image size, layer count, bytes wasted (package lists, caches, build
                trees, files written in one layer and deleted or replaced in a later one)
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO = "bench/tensorflow"
RELEASE, VARIANT = "21.08", "tf2-py3"
IMAGE = f"{REPO}:{RELEASE}-{VARIANT}"
WASTE_PATTERNS = (r"^var/lib/apt/lists/.+", r"^var/cache/apt/.+\.bin$", r"^var/cache/apt/archives/.+\.deb$",
                  r"^root/\.cache/.+", r"^tmp/.+", r"(^|/)__pycache__/.+\.pyc$",
                  r"^opt/tensorflow/tensorflow-source/build/.+")
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


def compile_seconds(log: str) -> float:
    m = re.findall(r"compile phase took ([\d.]+)s", log)
    if not m:
        raise SystemExit("bench: no 'compile phase took' line in the build log")
    return float(m[-1])


def marker_patch(value: int) -> str:
    src = (ROOT / "framework-src/csrc/core/matmul.cc").read_text().splitlines()
    n = len(src)
    body = [f" {t}" for t in src[-3:]] + ["+", f"+extern \"C\" int tfref_patch_marker(void) {{ return {value}; }}"]
    return "\n".join(["--- a/csrc/core/matmul.cc", "+++ b/csrc/core/matmul.cc", f"@@ -{n - 2},3 +{n - 2},5 @@",
                      *body]) + "\n"


def image_report(image: str) -> dict:
    """Size, layers, and bytes that sit in the image without being of use."""
    inspect = json.loads(sh(["docker", "image", "inspect", image])[1].stdout)[0]
    with tempfile.TemporaryDirectory() as tmp:
        tar_path = Path(tmp) / "image.tar"
        sh(["docker", "save", "-o", str(tar_path), image])
        final: dict[str, tuple[int, int]] = {}   # path -> (layer index, size) of its last writer
        shadowed = 0
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
                            if name in final:
                                shadowed += final[name][1]
                            final[name] = (index, m.size)
    junk = sum(size for path, (_, size) in final.items() if any(re.search(p, path) for p in WASTE_PATTERNS))
    size = inspect["Size"]
    return {"image": image, "size_bytes": size, "layers": len(inspect["RootFS"]["Layers"]),
            "wasted_shadowed_bytes": shadowed, "wasted_junk_bytes": junk,
            "wasted_fraction": round((shadowed + junk) / size, 5)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def push_figures(figure, cache: Path) -> None:
    """Push the release image, then a derived one: what does the second upload?"""
    root = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    host = f"127.0.0.1:{free_port()}"
    (root / "config.yml").write_text(f"version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: "
                                     f"{{rootdirectory: {root}/data}}\nhttp:\n  addr: {host}\n")
    registry = subprocess.Popen(["/usr/bin/docker-registry", "serve", str(root / "config.yml")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        t_parent, out = sh(["builder", "push", IMAGE, "--registry", host, "--json", "-q"])
        parent = json.loads(out.stdout)
        derived = f"{REPO}:with-jq"
        sh(["builder", "derive", "--from", IMAGE, "--apt", "jq", "--tag", derived, "--no-test", "-q"])
        t_derived, out = sh(["builder", "push", derived, "--registry", host, "--json", "-q"])
        pushed = json.loads(out.stdout)
        n_parent = len(json.loads(sh(["docker", "image", "inspect", IMAGE])[1].stdout)[0]["RootFS"]["Layers"])
        sizes = json.loads(sh(["docker", "image", "inspect", derived])[1].stdout)[0]["Size"] - \
            json.loads(sh(["docker", "image", "inspect", IMAGE])[1].stdout)[0]["Size"]
        figure("push of the release image", round(t_parent, 1), "s", f"builder push {IMAGE} --registry {host}",
               f"{parent['bytes_uploaded'] / 1e6:.0f} MB in {parent['layers_pushed']} layers")
        figure("push of a derived image after its parent", round(t_derived, 1), "s",
               f"builder push {derived} --registry {host}",
               f"uploaded {pushed['bytes_uploaded'] / 1e6:.2f} MB (as the engine counts it) in {pushed['layers_pushed']} layers "
               f"for {sizes / 1e6:.2f} MB of new layers (uncompressed); skipped {pushed['layers_skipped']} "
               f"of the parent's {n_parent}")
    finally:
        registry.terminate()
        registry.wait(10)
        import shutil
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of the short measurements (median)")
    ap.add_argument("--skip-base", action="store_true", help="do not rebuild the offline base")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    env = {"BUILDER_CACHE_DIR": str(cache)}
    os.environ.update(env)
    results: dict = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                 "docker": sh(["docker", "version", "--format", "{{.Server.Version}}"])[1].stdout.strip()},
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "figures": []}

    def figure(name: str, value, unit: str, command: str, note: str = "") -> None:
        results["figures"].append({"name": name, "value": value, "unit": unit, "command": command, "note": note})
        print(f"{name:<44} {value!s:>12} {unit:<8} {note}", flush=True)

    print(f"{'figure':<44} {'value':>12} {'unit':<8} note")
    figure("cli start-up (builder --help), median", round(median_time(["builder", "--help"], args.runs), 3), "s",
           "builder --help", "target < 0.3 s")
    figure("render all Dockerfiles, median", round(median_time(["builder", "render", "--all", "--check"], args.runs), 3),
           "s", "builder render --all --check")

    if not args.skip_base:
        t, _ = sh(["builder", "base", "--release", RELEASE, "--rebuild", "-q"])
        figure("offline base build (debootstrap + CUDA)", round(t, 1), "s", f"builder base --release {RELEASE} --rebuild")
    noop_base = median_time(["builder", "base", "--release", RELEASE, "-q"], args.runs)
    figure("offline base, asked again (no-op), median", round(noop_base, 3), "s", f"builder base --release {RELEASE}",
           "target < 1 s")

    build = ["builder", "build", "--release", RELEASE, "--variant", VARIANT, "--repo", REPO, "-q"]
    t_cold, _ = sh(build + ["--build-id", "cold", "--no-cache"])
    cold_compile = compile_seconds(log_path(cache, f"{RELEASE}-{VARIANT}-cold.log").read_text())
    figure("cold build of 21.08 tf2 on the base", round(t_cold, 1), "s", " ".join(build[:-1] + ["--no-cache"]))
    figure("  of which framework compile (7 archs)", round(cold_compile, 1), "s", "nvbuild.sh compile phase")
    figure("  of which the rest", round(t_cold - cold_compile, 1), "s", "toolchain, packaging, layers")

    t_noop = statistics.median(sh(build + ["--build-id", "cold"])[0] for _ in range(args.runs))
    figure("no-op rebuild, median", round(t_noop, 2), "s", " ".join(build[:-1]) + " (again)",
           f"{t_noop / t_cold:.1%} of cold; target <= 3%")

    t_env, _ = sh(build + ["--build-id", "cold", "--env", "TF_AUTOTUNE_THRESHOLD=1", "--tag", f"{REPO}:envonly"])
    env_log = log_path(cache, f"{RELEASE}-{VARIANT}-cold.log").read_text()
    recompiled = "compile phase took" in env_log
    figure("env-default change only", round(t_env, 2), "s", " ".join(build[:-1]) + " --env TF_AUTOTUNE_THRESHOLD=1",
           "recompiled the framework: " + ("YES (target missed)" if recompiled else "no"))

    # Patch-and-rebuild: seed a shared cache with the release build, then one-file patches.
    cache_dir = cache / "compile-cache"
    port = free_port()
    _, served = sh(["builder", "cache", "serve", "--detach", "--dir", str(cache_dir), "--port", str(port)])
    url = served.stdout.strip() + "/ccache"
    try:
        sh(build + ["--build-id", "seed", "--tag", f"{REPO}:seeded", "--compile-cache", url, "--no-cache"])
        seeded_compile = compile_seconds(log_path(cache, f"{RELEASE}-{VARIANT}-seed.log").read_text())
        patch = Path(tempfile.mkdtemp()) / "one-file.patch"
        timings = {}
        for label, extra in (("warm", ["--compile-cache", url]), ("nocache", [])):
            patch.write_text(marker_patch(random.randint(1, 10 ** 9)))
            tag = f"{REPO}:patch-{label}"
            t, _ = sh(["builder", "derive", "--from", f"{REPO}:seeded", "--patch", str(patch), "--tag", tag,
                       "--no-test", "-q", *extra])
            log = log_path(cache, f"derive-{tag.replace('/', '_').replace(':', '_')}.log").read_text()
            timings[label] = (t, compile_seconds(log), re.findall(r"nvbuild.sh: compiled: (\S+)", log))
        stats = json.loads(sh(["builder", "cache", "stats", "--dir", str(cache_dir), "--json"])[1].stdout)
    finally:
        sh(["builder", "cache", "stop", "--dir", str(cache_dir)], check=False)
    (tw, cw, units), (tn, cn, _) = timings["warm"], timings["nocache"]
    figure("release build seeding the cache: compile", round(seeded_compile, 1), "s",
           " ".join(build[:-1]) + f" --compile-cache {url}", f"cold compile through ccache (vs {cold_compile:.1f}s plain)")
    figure("one-file patch, NGC way (no cache): compile", round(cn, 2), "s",
           "builder derive --from IMAGE --patch one-file.patch", f"whole derive {tn:.1f}s")
    figure("one-file patch, warm shared cache: compile", round(cw, 2), "s",
           f"builder derive --from IMAGE --patch one-file.patch --compile-cache {url}",
           f"whole derive {tw:.1f}s; compiled: {', '.join(units) or 'nothing'}")
    figure("patch rebuild ratio (warm / full recompile)", f"{cw / cn:.1%}", "", "compile phase seconds, same run",
           "target <= 15%")
    figure("compile cache hit rate over the run", f"{stats['hit_rate']:.0%}", "", "builder cache stats",
           f"{stats['hits']} hits / {stats['lookups']} lookups")

    push_figures(figure, cache)

    report = image_report(IMAGE)
    figure("image size", round(report["size_bytes"] / 1e9, 2), "GB", f"docker image inspect {IMAGE}")
    figure("layers", report["layers"], "", f"docker image inspect {IMAGE}")
    figure("bytes wasted", f"{report['wasted_fraction']:.2%}", "",
           "bench/run.py image_report (docker save)",
           f"{(report['wasted_shadowed_bytes'] + report['wasted_junk_bytes']) / 1e6:.1f} MB; target < 1%")
    results["image"] = report

    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
