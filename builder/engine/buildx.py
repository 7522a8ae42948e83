"""Builds through the Docker CLI's buildx (BuildKit in the engine): the argv, the
`--progress=rawjson` stream turned into step events, the image id read from
`--metadata-file`. buildx is never given a tag: the caller tags after its own checks,
as with the legacy builder. An interrupt stops buildx's whole process group.

builder/engine/buildkit_engine.py puts it behind the engine interface."""

from __future__ import annotations

import base64
import codecs
import json
import os
import re
import selectors
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator

from builder.core import layer_cache
from builder.core.errors import BuildError, UserError
from builder.core.redact import redact
from builder.engine import image_archive
from builder.engine.signals import signals_raise

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
    contexts: dict[str, str] = field(default_factory=dict)  # --build-context NAME=VALUE
    builder: str | None = None
    network: str | None = None
    no_cache: bool = False
    cache_ref: str | None = None  # registry layer cache: imported before, exported (mode=max) after
    output_file: Path | None = None  # the image as an archive there, instead of into the builder's engine
    compression: str = "gzip"  # of the image's layers (zstd: every layer, the base's too)


def output(dest: Path | None = None, compression: str = "gzip") -> str:
    """buildx's --output for one plain image, into the engine or as an archive at DEST, every
    layer in COMPRESSION. Forced for gzip too: unforced, BuildKit reuses the blob a cached step
    already has, and after a zstd build on the same engine that is a zstd blob, written into a
    gzip image under Docker's media types as `rootfs.diff.tar.zstd`, a layer type Docker's own
    engine does not unpack (`docker load`: "mismatched image rootfs and manifest layers";
    RELIABILITY.md). Forcing gzip costs nothing where the layers are gzip already. zstd takes
    OCI media types (Docker's manifest has no zstd layer type)."""
    spec = "type=docker" + (f",dest={dest}" if dest else "") + f",compression={compression},force-compression=true"
    return spec if compression == "gzip" else spec + ",oci-mediatypes=true"


def argv(req: BuildxRequest, metadata_file: Path) -> list[str]:
    """The buildx command line: no tag, no attestations (one plain image), loaded into the engine."""
    cmd = [
        "docker",
        "buildx",
        "build",
        "--progress=rawjson",
        "--provenance=false",
        "--sbom=false",
        "--metadata-file",
        str(metadata_file),
        "--output",
        output(req.output_file, req.compression),
        "--file",
        str(req.context / req.dockerfile),
    ]
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
    for name, value in sorted(req.contexts.items()):
        cmd += ["--build-context", f"{name}={value}"]
    if req.no_cache:
        cmd.append("--no-cache")
    if req.cache_ref:
        cmd += layer_cache.buildx_flags(req.cache_ref)
    return cmd + [str(req.context)]


class ObjectStream:
    """rawjson prints pretty-printed objects one after another (several lines each), in
    chunks that may cut an object anywhere: feed() returns the objects completed so far."""

    def __init__(self) -> None:
        self.decoder, self.buf = json.JSONDecoder(), ""

    def feed(self, chunk: str) -> list[dict]:
        self.buf += chunk
        objs = []
        while True:
            self.buf = self.buf.lstrip()
            if not self.buf:
                break
            try:
                obj, end = self.decoder.raw_decode(self.buf)
            except json.JSONDecodeError:
                break  # an object cut in the middle: wait for the rest
            self.buf = self.buf[end:]
            if isinstance(obj, dict):
                objs.append(obj)
        return objs

    def end(self) -> list[dict]:
        rest, self.buf = self.buf.strip(), ""
        return [{"unparsed": rest}] if rest else []  # not JSON: buildx's own error text


def json_objects(chunks: Iterable[str]) -> Iterator[dict]:
    stream = ObjectStream()
    for chunk in chunks:
        yield from stream.feed(chunk)
    yield from stream.end()


def _seconds(started: str, completed: str) -> float:
    def parse(t: str) -> datetime:  # RFC 3339 with nanoseconds: keep microseconds
        head, _, frac = t.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}")

    return max(0.0, (parse(completed) - parse(started)).total_seconds())


@dataclass
class Event:
    kind: str  # "step" (started), "done" (completed or cached), "cached", "log", "error", "note" (ours),
    # "raw" (buildx's SolveStatus object itself, for --progress rawjson)
    step: str
    text: str = ""
    seconds: float = 0.0  # "done": how long the step ran (a "cached" event: nothing ran, the layer came from a cache)
    raw: dict | None = None


def redacted(obj: dict) -> dict:
    """A SolveStatus object with its logs (base64) redacted of credentials, as rawjson shows it."""
    logs = []
    for log in obj.get("logs") or []:
        text = base64.b64decode(log.get("data") or "").decode("utf-8", "replace")
        clean = redact(text)
        logs.append(log if clean == text else {**log, "data": base64.b64encode(clean.encode()).decode()})
    return {**obj, "logs": logs} if logs else obj


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
    image_id: str  # the digest the engine knows the image by (config digest on the classic store)
    metadata: dict
    steps: int
    cached: int


@dataclass
class Job:
    """One buildx command that streams rawjson on stderr, and what its events go to."""

    cmd: list[str]
    on_event: Callable[[Event], None]
    env: dict[str, str] | None = None
    cache_asked: bool = False  # a failure to export a cache gets its own message
    steps: Steps = field(default_factory=Steps)
    tail: list[str] = field(default_factory=list)
    failed: tuple[str, str] = ("", "")  # the failing step and why (its first error, not the summary)

    def feed(self, obj: dict) -> None:
        self.on_event(Event("raw", "", raw=redacted(obj)))
        for event in self.steps.feed(obj):
            if event.kind == "log":
                self.tail = (self.tail + redact(event.text).splitlines())[-TAIL_LINES:]
            elif event.kind == "error" and not self.failed[0]:
                self.failed = (event.step, redact(event.text))
            self.on_event(event)

    def outcome(self, rc: int) -> Steps | BuildError | UserError:
        if rc == 0:
            return self.steps
        step, why = self.failed
        if self.cache_asked and layer_cache.NO_EXPORT.search(why):
            return layer_cache.no_export_error()
        return BuildError(
            f"buildx failed{f' at {step}' if step else ''}: {why or f'exit {rc}'}".splitlines()[0],
            step=step,
            tail=self.tail,
        )


def run_all(jobs: list[Job]) -> list[Steps | BuildError | UserError]:
    """Run JOBS at once (one per builder), reading their streams as they come; each job's
    steps, or the BuildError it failed with (the others go on), or a UserError where the
    engine refused what was asked (no cache export). An interrupt stops them all."""
    procs: list[subprocess.Popen] = []
    with signals_raise():
        try:
            for job in jobs:
                procs.append(
                    subprocess.Popen(
                        job.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=job.env
                    )
                )
            streams = {
                _stderr(p).fileno(): (job, ObjectStream(), codecs.getincrementaldecoder("utf-8")("replace"))
                for job, p in zip(jobs, procs)
            }
            with selectors.DefaultSelector() as sel:
                for p in procs:
                    sel.register(_stderr(p), selectors.EVENT_READ)
                while sel.get_map():
                    for key, _ in sel.select():
                        job, objs, text = streams[key.fd]
                        data = os.read(key.fd, 1 << 16)
                        if not data:
                            sel.unregister(key.fileobj)
                            for obj in objs.feed(text.decode(b"", final=True)) + objs.end():
                                job.feed(obj)
                            continue
                        for obj in objs.feed(text.decode(data)):
                            job.feed(obj)
            rcs = [p.wait() for p in procs]
        except BaseException:  # an interrupt, or an event that could not be recorded
            for p in procs:
                stop(p)
            raise
        finally:
            for p in procs:
                _stderr(p).close()
    return [job.outcome(rc) for job, rc in zip(jobs, rcs)]


def _stderr(proc: subprocess.Popen) -> IO[bytes]:
    """The pipe run_all started PROC with."""
    if proc.stderr is None:
        raise AssertionError("buildx was started without a stderr pipe")
    return proc.stderr


def _run(cmd: list[str], on_event: Callable[[Event], None], env: dict[str, str] | None, cache_asked: bool) -> Steps:
    """Run one buildx command; a failure raises BuildError with the failing step and the output's tail."""
    outcome = run_all([Job(cmd, on_event, env, cache_asked)])[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def image_of(metadata: dict, known: Callable[[str], bool] | None) -> str:
    """The digest (of those buildx reports for one image) that the engine resolves."""
    digests = [metadata.get("containerimage.config.digest"), metadata.get("containerimage.digest")]
    found = [d for d in digests if d and (known is None or known(d))]
    if not found:
        raise BuildError(f"buildx reported no image the engine knows ({metadata})")
    return found[0]


def build(
    req: BuildxRequest,
    on_event: Callable[[Event], None] = lambda e: None,
    known: Callable[[str], bool] | None = None,
    env: dict[str, str] | None = None,
) -> BuildxResult:
    """Run buildx; return the image's id (KNOWN(digest) tells which digest the engine
    resolves). A failure raises BuildError with the failing step and the output's tail."""
    with tempfile.TemporaryDirectory(prefix="tfbuilder-buildx-") as tmp:
        meta = Path(tmp) / "metadata.json"
        steps = _run(argv(req, meta), on_event, env, bool(req.cache_ref))
        metadata = json.loads(meta.read_text())
    return BuildxResult(image_of(metadata, known), metadata, len(steps.done), len(steps.cached))


def bake_argv(definition_file: Path, metadata_file: Path, targets: list[str], builder: str | None = None) -> list[str]:
    """`docker buildx bake` of TARGETS in DEFINITION_FILE (which says everything else)."""
    cmd = [
        "docker",
        "buildx",
        "bake",
        "--progress=rawjson",
        "--metadata-file",
        str(metadata_file),
        "-f",
        str(definition_file),
    ]
    return cmd + (["--builder", builder] if builder else []) + targets


@dataclass(frozen=True)
class Bake:
    """One `docker buildx bake` of TARGETS (and the targets they need) on one builder."""

    definition: dict
    targets: list[str]
    on_event: Callable[[Event], None] = lambda e: None
    env: dict[str, str] | None = None
    builder: str | None = None


def bake_all(bakes: list[Bake]) -> list[dict[str, dict] | BuildError]:
    """Run BAKES at once; for each, every built target's metadata (image_of() picks its id)
    or the BuildError it failed with. Each definition goes to a private file, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="tfbuilder-bake-") as tmp:
        jobs = []
        for i, b in enumerate(bakes):
            meta, path = Path(tmp) / f"metadata-{i}.json", Path(tmp) / f"docker-bake-{i}.json"
            path.write_text(json.dumps(b.definition))
            cache_asked = any("cache-to" in t for t in b.definition.get("target", {}).values())
            jobs.append(Job(bake_argv(path, meta, b.targets, b.builder), b.on_event, b.env, cache_asked))
        outcomes: list[dict[str, dict] | BuildError] = []
        for i, outcome in enumerate(run_all(jobs)):
            if isinstance(outcome, UserError):  # the engine cannot do what the definition asks
                raise outcome
            if isinstance(outcome, BuildError):
                outcomes.append(outcome)
                continue
            metadata = json.loads((Path(tmp) / f"metadata-{i}.json").read_text())
            outcomes.append(
                {name: m for name, m in metadata.items() if isinstance(m, dict) and "containerimage.digest" in m}
            )
    return outcomes


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


def load(archive: Path, env: dict[str, str] | None, attempts: int = 2) -> str:
    """Load an image archive into the engine ENV points at; the id it reports. A refusal of
    an unsound archive says what is wrong with it; a sound one is tried once more. (CI saw
    "mismatched image rootfs and manifest layers" twice. Reproduced here one way: a gzip
    image that reused a zstd blob, a layer type Docker's engine does not unpack, which
    output() now prevents and problems() names.)"""
    why = "no answer"
    refused = "the image built on another builder could not be loaded into this engine"
    for _ in range(attempts):
        out = subprocess.run(["docker", "load", "-q", "-i", str(archive)], capture_output=True, text=True, env=env)
        found = re.findall(r"Loaded image(?: ID)?: (\S+)", out.stdout)
        if out.returncode == 0 and found:
            return found[-1]
        why = (out.stderr.strip() or out.stdout.strip() or "no answer").splitlines()[-1]
        wrong = image_archive.problems(archive)
        if wrong:
            raise BuildError(f"{refused}: {why} (the archive: {'; '.join(wrong[:2])})", step="load")
    raise BuildError(f"{refused}: {why} ({attempts} tries; the archive itself is sound)", step="load")


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


def buildx_version() -> str:
    """`docker buildx version` of the Docker CLI on PATH ("" when it has none): BuildKit is
    a client plugin, so this asks the CLI, not the engine."""
    try:
        out = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""
