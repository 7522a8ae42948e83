"""Builds through the Docker CLI's buildx (BuildKit in the engine): the argv, the
`--progress=rawjson` stream turned into step events, the image id read from
`--metadata-file`. buildx is never given a tag: the caller tags after its own checks,
as with the legacy builder. An interrupt stops buildx's whole process group.

builder/buildkit_engine.py puts it behind the engine interface."""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Iterator

from builder import layer_cache
from builder.engine import signals_raise
from builder.errors import BuildError, Interrupted, UserError, redact

TAIL_LINES = 30
# A buildx builder or Docker context name: a whole-string match, no ',' (buildx's option
# separator), no '=' or whitespace.
BUILDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class BuildxRequest:
    context: Path
    dockerfile: str = "Dockerfile"
    buildargs: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, Path] = field(default_factory=dict)  # id -> file; only ids and paths reach argv
    target: str | None = None
    builder: str | None = None
    network: str | None = None
    no_cache: bool = False
    cache_ref: str | None = None  # registry layer cache: imported before, exported (mode=max) after
    output_file: Path | None = None  # the image as an archive there, instead of into the builder's engine


def argv(req: BuildxRequest, metadata_file: Path) -> list[str]:
    """The buildx command line: no tag, no attestations (one plain image), loaded into the engine."""
    cmd = ["docker", "buildx", "build", "--progress=rawjson", "--provenance=false", "--sbom=false",
           "--metadata-file", str(metadata_file),
           "--output", f"type=docker,dest={req.output_file}" if req.output_file else "type=docker",
           "--file", str(req.context / req.dockerfile)]
    if req.builder:
        cmd += ["--builder", req.builder]
    for name, value in sorted(req.buildargs.items()):
        cmd += ["--build-arg", f"{name}={value}"]
    for sid, path in sorted(req.secrets.items()):
        cmd += ["--secret", f"id={sid},src={path}"]
    if req.network:
        cmd += ["--network", req.network]
    if req.target:
        cmd += ["--target", req.target]
    if req.no_cache:
        cmd.append("--no-cache")
    if req.cache_ref:
        cmd += layer_cache.buildx_flags(req.cache_ref)
    return cmd + [str(req.context)]


def json_objects(chunks: Iterable[str]) -> Iterator[dict]:
    """rawjson prints pretty-printed objects one after another (several lines each)."""
    decoder, buf = json.JSONDecoder(), ""
    for chunk in chunks:
        buf += chunk
        while True:
            buf = buf.lstrip()
            if not buf:
                break
            try:
                obj, end = decoder.raw_decode(buf)
            except json.JSONDecodeError:
                break  # an object cut in the middle: wait for the rest
            buf = buf[end:]
            if isinstance(obj, dict):
                yield obj
    if buf.strip():
        yield {"unparsed": buf.strip()}  # not JSON: buildx's own error text


def _seconds(started: str, completed: str) -> float:
    def parse(t: str) -> datetime:  # RFC 3339 with nanoseconds: keep microseconds
        head, _, frac = t.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}")

    return max(0.0, (parse(completed) - parse(started)).total_seconds())


@dataclass
class Event:
    kind: str            # "step" (started), "done" (completed or cached), "cached", "log", "error", "note" (ours)
    step: str
    text: str = ""
    seconds: float = 0.0  # "done": how long the step ran (a "cached" event: nothing ran, the layer came from a cache)


class Steps:
    """SolveStatus objects -> events, each step reported once as started and once as done."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.started: set[str] = set()
        self.done: set[str] = set()
        self.cached: set[str] = set()  # a vertex may say "cached" after it said "completed"

    def cached_steps(self) -> list[str]:
        return sorted(self.names[d] for d in self.cached)

    def feed(self, obj: dict) -> list[Event]:
        events: list[Event] = []
        for v in obj.get("vertexes") or []:
            digest, name = v.get("digest", ""), v.get("name", "")
            self.names[digest] = name
            if v.get("started") and digest not in self.started:
                self.started.add(digest)
                events.append(Event("step", name))
            if v.get("cached") and digest not in self.cached:
                self.cached.add(digest)
                events.append(Event("cached", name))  # before or after its "done": BuildKit says it either way
            if v.get("error"):
                events.append(Event("error", name, v["error"]))
            elif (v.get("completed") or v.get("cached")) and digest not in self.done:
                self.done.add(digest)
                seconds = _seconds(v["started"], v["completed"]) if v.get("started") and v.get("completed") else 0.0
                events.append(Event("done", name, seconds=seconds))
        for log in obj.get("logs") or []:
            text = base64.b64decode(log.get("data") or "").decode("utf-8", "replace")
            events.append(Event("log", self.names.get(log.get("vertex", ""), ""), text))
        if "unparsed" in obj:
            events.append(Event("error", "", obj["unparsed"]))
        return events


@dataclass(frozen=True)
class BuildxResult:
    image_id: str   # the digest the engine knows the image by (config digest on the classic store)
    metadata: dict
    steps: int
    cached: int


def _run(cmd: list[str], on_event: Callable[[Event], None], env: dict[str, str] | None,
         cache_asked: bool) -> Steps:
    """Run a buildx command that streams rawjson on stderr; a failure raises BuildError
    with the failing step and the output's tail."""
    steps, tail, failed = Steps(), [], ("", "")
    with signals_raise():
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, env=env)
        try:
            for obj in json_objects(iter(proc.stderr.readline, "")):
                for event in steps.feed(obj):
                    if event.kind == "log":
                        tail = (tail + redact(event.text).splitlines())[-TAIL_LINES:]
                    elif event.kind == "error" and not failed[0]:  # the failing step's, not the summary
                        failed = (event.step, redact(event.text))
                    on_event(event)
            rc = proc.wait()
        except Interrupted:
            stop(proc)
            raise
    if rc != 0:
        step, why = failed
        if cache_asked and layer_cache.NO_EXPORT.search(why):
            raise layer_cache.no_export_error()
        raise BuildError(f"buildx failed{f' at {step}' if step else ''}: {why or f'exit {rc}'}".splitlines()[0],
                         step=step, tail=tail)
    return steps


def image_of(metadata: dict, known: Callable[[str], bool] | None) -> str:
    """The digest (of those buildx reports for one image) that the engine resolves."""
    digests = [metadata.get("containerimage.config.digest"), metadata.get("containerimage.digest")]
    found = [d for d in digests if d and (known is None or known(d))]
    if not found:
        raise BuildError(f"buildx reported no image the engine knows ({metadata})")
    return found[0]


def build(req: BuildxRequest, on_event: Callable[[Event], None] = lambda e: None,
          known: Callable[[str], bool] | None = None, env: dict[str, str] | None = None) -> BuildxResult:
    """Run buildx; return the image's id (KNOWN(digest) tells which digest the engine
    resolves). A failure raises BuildError with the failing step and the output's tail."""
    with tempfile.TemporaryDirectory(prefix="tfbuilder-buildx-") as tmp:
        meta = Path(tmp) / "metadata.json"
        steps = _run(argv(req, meta), on_event, env, bool(req.cache_ref))
        metadata = json.loads(meta.read_text())
    return BuildxResult(image_of(metadata, known), metadata, len(steps.done), len(steps.cached))


def bake_argv(definition_file: Path, metadata_file: Path, targets: list[str], builder: str | None = None) -> list[str]:
    """`docker buildx bake` of TARGETS in DEFINITION_FILE (which says everything else)."""
    cmd = ["docker", "buildx", "bake", "--progress=rawjson", "--metadata-file", str(metadata_file),
           "-f", str(definition_file)]
    return cmd + (["--builder", builder] if builder else []) + targets


def bake(definition: dict, targets: list[str], on_event: Callable[[Event], None] = lambda e: None,
         env: dict[str, str] | None = None, builder: str | None = None) -> dict[str, dict]:
    """Run a bake of TARGETS (and the targets they need); return each built target's
    metadata (image_of() picks its id). The definition goes to a private file that is
    removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="tfbuilder-bake-") as tmp:
        meta, path = Path(tmp) / "metadata.json", Path(tmp) / "docker-bake.json"
        path.write_text(json.dumps(definition))
        cache_asked = any("cache-to" in t for t in definition.get("target", {}).values())
        _run(bake_argv(path, meta, targets, builder), on_event, env, cache_asked)
        metadata = json.loads(meta.read_text())
    return {name: m for name, m in metadata.items() if isinstance(m, dict) and "containerimage.digest" in m}


def check_builder(name: str) -> None:
    """NAME is a builder buildx knows (one it created, or a Docker context), or a one-line refusal."""
    if not BUILDER_NAME.fullmatch(name):
        raise UserError(f"--builder {name[:70]!r}: not a builder name (docker buildx ls lists them)")
    try:
        out = subprocess.run(["docker", "buildx", "inspect", name], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"--builder {name}: buildx did not answer ({type(exc).__name__})") from None
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["unknown"])[-1].removeprefix("ERROR: ")
        raise UserError(f"--builder {name}: {why} (docker buildx ls lists the builders and contexts)")


def on_builder(name: str, env: dict[str, str]) -> tuple[str | None, dict[str, str]]:
    """How to build on NAME: (the --builder value, buildx's environment). A Docker context
    (another engine: its `docker` driver) is chosen through DOCKER_CONTEXT, since buildx
    refuses `--builder` for a context that is not the current one; a builder instance
    (docker-container, remote, kubernetes drivers) through --builder."""
    probe = subprocess.run(["docker", "context", "inspect", name], capture_output=True, text=True, env=env)
    if probe.returncode == 0:
        return None, {**{k: v for k, v in env.items() if k != "DOCKER_HOST"}, "DOCKER_CONTEXT": name}
    return name, env


def load(archive: Path, env: dict[str, str] | None) -> str:
    """Load an image archive into the engine ENV points at; the id it reports."""
    out = subprocess.run(["docker", "load", "-q", "-i", str(archive)], capture_output=True, text=True, env=env)
    found = re.findall(r"Loaded image(?: ID)?: (\S+)", out.stdout)
    if out.returncode != 0 or not found:
        raise BuildError(f"the image built on another builder could not be loaded into this engine: "
                         f"{(out.stderr.strip() or out.stdout.strip() or 'no answer').splitlines()[-1]}",
                         step="load")
    return found[-1]


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGINT to buildx's process group (it cancels the build in the engine), then SIGKILL."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue
