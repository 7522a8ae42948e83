"""The Docker engine through docker-py's low-level APIClient: the one module that talks
to docker-py (an import-linter contract keeps it so).

The build stream is read as it arrives, any `error` in it raises (docker-py itself does
not), the last lines are kept for the failure message and the full log goes to a file.
Images are built untagged and tagged only after success, so a failed or interrupted
build never moves an existing tag.
"""

from __future__ import annotations

import collections
import re
import time
from pathlib import Path
from typing import Any, Iterator

from builder.core import grammar
from builder.core.contract import split_ref  # the one reference grammar (image contract)
from builder.core.errors import BuildError, Interrupted, UserError
from builder.core.redact import redact
from builder.engine.api import (
    BakeJob,
    BuildRequest,
    BuildResult,
    CannotStart,
    EngineError,
    EngineVersion,
    ImageSummary,
    Unreachable,
)
from builder.engine.dockerfile_mounts import legacy_dockerfile
from builder.engine.progress import Progress
from builder.engine.signals import signals_raise

STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
RUNNING_IN = re.compile(r"^ ---> Running in ([0-9a-f]{12,64})")
STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
TAIL_LINES = 30


class DockerEngine:
    """The Docker engine through docker-py's APIClient (the legacy builder)."""

    backend = "legacy"  # how build() builds (BuildKitEngine: "buildkit")

    def __init__(self, base_url: str | None = None, timeout: int = 600):
        import docker
        from docker.utils import kwargs_from_env

        kwargs = kwargs_from_env()
        if base_url:
            kwargs["base_url"] = base_url
        self.where = kwargs.get("base_url", "unix:///var/run/docker.sock")
        try:
            self.api = docker.APIClient(timeout=timeout, **kwargs)
            self.api.ping()
        except Exception as exc:  # docker raises several unrelated types here
            raise Unreachable(self.where, type(exc).__name__) from None

    def ping(self) -> dict[str, Any]:
        return self.api.info()

    def version(self) -> EngineVersion:
        version = self.api.version()
        return EngineVersion(version.get("Version"), version.get("ApiVersion"), self.api.api_version)

    def bake(self, jobs: list[BakeJob], progress: Progress) -> list[dict[str, str] | BuildError]:
        """Only BuildKit bakes (callers check `backend` first and build one by one)."""
        raise UserError("the legacy builder has no bake: build the variants one by one")

    def build(self, request: BuildRequest, progress: Progress | None = None) -> BuildResult:
        for wanted, option in (
            (request.cache_ref, "--layer-cache"),
            (request.builder, "--builder"),
            (request.compression != "gzip", "--compression zstd"),
        ):
            if wanted:
                raise UserError(
                    f"{option} needs the BuildKit backend (docker buildx); this engine builds with "
                    "the legacy builder (`builder doctor` says why)"
                )
        progress = progress or Progress("build", mode=request.progress)
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        containers: list[str] = []
        created: list[str] = []  # step images of a --no-cache build (none of them shared)
        image_id = ""
        steps = cached = 0
        current = ""
        log = open(request.log_path, "w", encoding="utf-8") if request.log_path else None
        stream = None
        try:
            with signals_raise(), progress.heartbeat():
                with legacy_dockerfile(request.context) as dockerfile:  # docker-py reads it in build()
                    stream = self.api.build(
                        path=str(request.context),
                        dockerfile=dockerfile,
                        rm=True,
                        forcerm=True,
                        nocache=request.nocache,
                        pull=False,
                        buildargs=request.buildargs,
                        network_mode=request.network_mode,
                        target=request.target,
                        decode=True,
                    )
                for chunk in stream:
                    progress.on_raw(chunk)
                    if "error" in chunk or "errorDetail" in chunk:
                        detail = chunk.get("errorDetail") or {}
                        message = (chunk.get("error") or detail.get("message") or "unknown error").strip()
                        if log:
                            log.write(f"ERROR: {redact(message)}\n")
                        raise BuildError(message, current, list(tail), request.log_path)
                    if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                        image_id = chunk["aux"]["ID"]
                    text = chunk.get("stream")
                    if not text:
                        continue
                    if log:
                        log.write(redact(text))  # the log writer: credentials never reach the file
                        log.flush()
                    progress.on_log(text)
                    for line in text.splitlines():
                        m = STEP.match(line)
                        if m:
                            if log:  # when each step started: the bench and post-mortems read it
                                # (on a line of its own: the engine sends a step's newline apart)
                                log.write(
                                    ("" if text.endswith("\n") else "\n")
                                    + f"#builder-step {m.group(1)}/{m.group(2)} at "
                                    f"{time.monotonic() - progress.start:.1f}s\n"
                                )
                            steps = int(m.group(1))
                            current = f"step {m.group(1)}/{m.group(2)}: {m.group(3)}"
                            progress.on_step(int(m.group(1)), int(m.group(2)), m.group(3))
                            tail.clear()
                            continue
                        m = STEP_IMAGE.match(line)
                        if m and request.nocache and not current.split(": ", 1)[-1].upper().startswith("FROM"):
                            created.append(m.group(1))
                            continue
                        m = RUNNING_IN.match(line)
                        if m:
                            containers.append(m.group(1))
                        elif line.strip() == "---> Using cache":
                            cached += 1
                        elif line.strip():
                            tail.append(line.rstrip())
                        done = re.match(r"^Successfully built ([0-9a-f]+)", line)
                        if done and not image_id:
                            image_id = done.group(1)
        except Interrupted:
            self._abort(stream, containers, created)
            progress.done(f"interrupted during {current or 'the build'}; build containers removed")
            raise
        except BuildError:
            self._abort(stream, containers, created)
            raise
        except Exception as exc:
            self._abort(stream, containers, created)
            if exc.__class__.__module__.startswith(("docker", "requests", "urllib3")):
                raise BuildError(f"the engine failed: {exc}", current, list(tail), request.log_path) from None
            raise
        finally:
            if log:
                log.close()
        if not image_id:
            raise BuildError("the engine reported no image", current, list(tail), request.log_path)
        seconds = time.monotonic() - progress.start
        progress.done(f"built {image_id[:19]} ({steps} steps, {cached} from cache)")
        return BuildResult(image_id, steps, seconds, cached, request.log_path)

    def _abort(self, stream: Any, containers: list[str], created: list[str] | None = None) -> None:
        """Stop reading (the engine cancels a build whose client went away), remove the
        containers the build started, which the engine may leave behind, and the step
        images a --no-cache build made: the legacy builder takes the newest matching
        image as a cache hit, so a half chain left behind would make every later build
        branch off it and rebuild from there."""
        try:
            if stream is not None:
                stream.close()
        except Exception:
            pass
        deadline = time.monotonic() + 10
        pending = list(containers)
        while pending and time.monotonic() < deadline:
            for cid in list(pending):
                try:
                    self.remove_container(cid)  # one already gone counts as removed
                    pending.remove(cid)
                except Exception:
                    pass
            if pending:
                time.sleep(0.5)
        for image in reversed(created or []):  # newest first: each is the parent of the next
            try:
                self.remove_image(image)
            except Exception:
                pass

    def run_capture(
        self,
        image: str,
        command: list[str],
        binds: dict[str, str] | None = None,
        timeout: int = 600,
        stdout_only: bool = False,
    ) -> tuple[int, str]:
        """Run a throwaway container (entrypoint bypassed); return exit code and output
        (stdout and stderr merged, or stdout alone)."""
        import docker

        host_config = self.api.create_host_config(
            binds={src: {"bind": dst, "mode": "ro"} for src, dst in (binds or {}).items()}
        )
        try:
            container = self.api.create_container(
                image, command=command[1:], entrypoint=command[:1], host_config=host_config
            )
        except docker.errors.APIError as exc:
            raise CannotStart(image, command[0], _cause(exc)) from None
        cid = container["Id"]
        try:
            with signals_raise():
                try:
                    self.api.start(cid)
                except docker.errors.APIError as exc:  # no such program in the image, ...
                    raise CannotStart(image, command[0], _cause(exc)) from None
                code = self.api.wait(cid, timeout=timeout)["StatusCode"]
            output = self.api.logs(cid, stdout=True, stderr=not stdout_only).decode(errors="replace")
        finally:
            try:
                self.remove_container(cid)
            except Exception:
                pass
        return code, output

    def remove_container(self, container: str) -> None:
        """Remove a container, running or not; one that does not exist (any more) is no error."""
        import docker

        try:
            self.api.remove_container(container, force=True)
        except docker.errors.APIError as exc:
            if "No such container" in str(exc) or getattr(getattr(exc, "response", None), "status_code", 0) == 404:
                return
            raise EngineError(str(exc.explanation or exc)) from None

    def tag(self, image_id: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        if not self.api.tag(image_id, repo, tag, force=True):
            raise BuildError(f"the engine refused to tag {image_id} as {ref}")

    def remove_image(self, ref: str) -> None:
        """Remove a tag (or an untagged image). Never forced, and its parents are kept:
        an image another build already uses as its parent stays."""
        import docker

        try:
            self.api.remove_image(ref, force=False, noprune=True)
        except docker.errors.APIError as exc:
            raise EngineError(str(exc.explanation or exc)) from None

    def image_id(self, ref: str) -> str | None:
        import docker

        grammar.check_ref(ref, "image", image_id=True)  # docker-py takes '' for no image at all
        try:
            return self.api.inspect_image(ref)["Id"]
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as exc:
            if getattr(exc, "status_code", None) in (400, 404):
                return None
            raise

    def inspect(self, ref: str) -> dict[str, Any]:
        import docker

        grammar.check_ref(ref, "image", image_id=True)  # docker-py takes '' for no image at all
        try:
            return self.api.inspect_image(ref)
        except docker.errors.NotFound:
            raise UserError(f"no image '{ref}' in the engine") from None
        except docker.errors.APIError as exc:
            raise UserError(f"cannot inspect '{ref}': {exc.explanation or exc}") from None

    def image_labels(self, ref: str) -> dict[str, str]:
        return dict(self.inspect(ref).get("Config", {}).get("Labels") or {})

    def images(self, repository: str | None = None, label: str | None = None) -> list[ImageSummary]:
        """Images of REPOSITORY (all tags) and/or carrying LABEL ("key" or "key=value")."""
        found = self.api.images(name=repository, filters={"label": label} if label else None)
        return [
            ImageSummary(
                i["Id"], [t for t in i.get("RepoTags") or [] if t != "<none>:<none>"], dict(i.get("Labels") or {})
            )
            for i in found
        ]

    def login(self, username: str, password: str, registry: str) -> None:
        """Check credentials with the registry (reauth: a cached login proves nothing)."""
        import docker

        try:
            self.api.login(username, password=password, registry=registry, reauth=True)
        except docker.errors.APIError as exc:
            raise EngineError(str(exc.explanation or exc)) from None

    def push(self, ref: str, auth: dict[str, str]) -> Iterator[dict[str, Any]]:
        """Push REF; yields the engine's progress messages (status, id, progressDetail, aux,
        error) as they arrive. Failures arrive as `error` messages, not exceptions. AUTH is
        always a dict: docker-py treats None as "use the Docker config's credentials",
        which must not travel where the caller decided none may."""
        repo, tag = split_ref(ref)
        return self.api.push(repo, tag=tag, stream=True, decode=True, auth_config=dict(auth))

    def pull(self, ref: str) -> bool:
        """Try to pull; False (not an exception) when the registry cannot be reached."""
        repo, tag = split_ref(ref)
        try:
            for chunk in self.api.pull(repo, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    return False
        except Exception:
            return False
        return self.image_id(ref) is not None

    def import_rootfs(self, tar_path: Path, ref: str) -> str:
        repo, tag = split_ref(ref)
        with open(tar_path, "rb") as f:
            out = self.api.import_image_from_data(f, repository=repo, tag=tag)
        said = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
        if isinstance(out, (bytes, str)) and "error" in said.lower():
            raise BuildError(f"docker import failed: {said}")
        image = self.image_id(ref)
        if not image:
            raise BuildError(f"docker import produced no image {ref}: {said}")
        return image


def client_auth(host: str) -> tuple[str, str, str] | None:
    """(user, password, identity token) the user's Docker client config holds for registry
    HOST, resolved as docker-py resolves it: the host's credential helper (`credHelpers`)
    or, without one, `credsStore`; else `auths`; a helper's user `<token>` and an
    `identitytoken` entry are identity tokens. None when it holds none or cannot be read."""
    try:
        from docker import auth

        found = auth.resolve_authconfig(auth.load_config(), host)
    except Exception:
        return None
    if not isinstance(found, dict):
        return None
    token = found.get("IdentityToken") or found.get("identitytoken")
    if isinstance(token, str) and token:
        return found.get("Username") or found.get("username") or "<token>", "", token
    for user_key, password_key in (("Username", "Password"), ("username", "password")):
        if found.get(user_key) and found.get(password_key):
            return found[user_key], found[password_key], ""
    return None


def _cause(exc: Exception) -> str:
    """The engine's answer on one line; its error chain ends with the cause."""
    text = " ".join(str(getattr(exc, "explanation", None) or exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else "..." + text[-160:]
