"""An in-memory container engine for unit tests: the builder.engine.Engine interface,
no daemon. Images live in `store` (id -> labels, size, layers) with `tags` pointing at
them; every call is recorded in order (secrets never: a login records the user, not the
password); failures are configured on the instance:

    engine = FakeEngine()
    engine.add_image("local/img:1", labels={"a": "b"})
    engine.build_fails_at = 3            # the build's step 3 fails (BuildError)
    engine.push_transient_failures = 2   # the next two pushes fail with a retryable error
    engine.fail["login"] = EngineError("unauthorized: incorrect username or password")
    engine.interrupt("push")             # the next push is interrupted (SIGINT)

test_engine_interface.py keeps its methods' names and signatures equal to the
Protocol's and DockerEngine's.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import shlex
import signal
from pathlib import Path
from typing import Any, Callable, Iterator

from builder.core.errors import UserError
from builder.engine import (
    BakeJob,
    BuildError,
    BuildRequest,
    BuildResult,
    EngineError,
    EngineVersion,
    ImageSummary,
    Interrupted,
    Progress,
    split_ref,
)

# Public methods that configure the fake and are not part of the engine interface.
SETUP_METHODS = {"add_image", "interrupt", "names"}


def _digest(*parts: object) -> str:
    return "sha256:" + hashlib.sha256(repr(parts).encode()).hexdigest()


def _normal(ref: str) -> str:
    """A reference the way the engine stores it: no tag means :latest."""
    repo, tag = split_ref(ref)
    return f"{repo}:{tag}"


def _up_to_target(steps: list[tuple[str, str]], target: str | None) -> list[tuple[str, str]]:
    """The instructions a build of TARGET runs: up to the end of that stage (all without)."""
    if target is None:
        return steps
    starts = [
        i
        for i, (word, rest) in enumerate(steps)
        if word == "FROM" and rest.split()[-1] == target and len(rest.split()) == 3
    ]
    if not starts:
        raise BuildError(f'target stage "{target}" could not be found', "", [], None)
    later = [i for i, (word, _) in enumerate(steps) if word == "FROM" and i > starts[0]]
    return steps[: later[0]] if later else steps


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) per instruction, continuation lines joined, comments dropped."""
    joined, out = "", []
    for line in dockerfile.splitlines():
        if not joined and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        joined += line
        word, _, rest = joined.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        joined = ""
    return out


class FakeEngine:
    where = "fake://engine"
    backend = "legacy"  # a test sets "buildkit" to see the settings go as secrets

    def __init__(self) -> None:
        self.store: dict[str, dict[str, Any]] = {}  # id -> {"labels", "size", "layers", "env"}
        self.tags: dict[str, str] = {}  # "repo:tag" -> id
        self.calls: list[tuple] = []  # (method, *arguments) in call order
        self.containers: set[str] = set()  # containers that exist now
        self.pushed: dict[str, str] = {}  # ref -> digest the "registry" holds
        self.build_fails_at: int | None = None
        self.bake_fails_on: set[str | None] = set()  # builders whose bake fails (BuildError)
        self.build_steps = 3  # steps of a context without a Dockerfile
        self.push_transient_failures = 0
        self.push_error = "received unexpected HTTP status: 503 Service Unavailable"
        self.pullable: set[str] = set()  # refs a pull finds in a registry
        self.passwords: dict[str, str] = {}  # registry -> the one password it accepts
        self.fail: dict[str, BaseException] = {}  # method -> raised (once) when next called
        self.run_handler: Callable[[str, list[str]], tuple[int, str]] = lambda image, command: (0, "")
        self._ids = itertools.count(1)

    # --- setting the fake up ---------------------------------------------------------

    def add_image(
        self,
        ref: str | None = None,
        labels: dict[str, str] | None = None,
        size: int = 0,
        layers: list[str] | None = None,
        env: list[str] | None = None,
    ) -> str:
        """An image (tagged REF when given); returns its id."""
        image_id = _digest("image", next(self._ids))
        self.store[image_id] = {
            "labels": dict(labels or {}),
            "size": size,
            "layers": list(layers or [_digest("layer", image_id)]),
            "env": list(env or []),
        }
        if ref:
            self.tags[_normal(ref)] = image_id
        return image_id

    def interrupt(self, method: str, signum: int = signal.SIGINT) -> None:
        """The next call of METHOD raises Interrupted, as the CLI's signal handler would."""
        self.fail[method] = Interrupted(signum)

    def names(self) -> list[str]:
        """The methods called so far, in order."""
        return [c[0] for c in self.calls]

    def _call(self, method: str, *args: object) -> None:
        self.calls.append((method, *args))
        if method in self.fail:
            raise self.fail.pop(method)

    def _resolve(self, ref: str) -> str | None:
        if ref in self.store:
            return ref
        if _normal(ref) in self.tags:
            return self.tags[_normal(ref)]
        short = ref.removeprefix("sha256:")
        matches = [i for i in self.store if len(short) >= 12 and i.removeprefix("sha256:").startswith(short)]
        return matches[0] if len(matches) == 1 else None

    # --- the Engine interface --------------------------------------------------------

    def ping(self) -> dict[str, Any]:
        self._call("ping")
        return {"Driver": "overlay2", "DockerRootDir": "/var/lib/docker"}

    def version(self) -> EngineVersion:
        self._call("version")
        return EngineVersion("24.0.0-fake", "1.43", "1.43")

    def build(self, request: BuildRequest, progress: Progress | None = None) -> BuildResult:
        """FROM and LABEL of the context's Dockerfile are honoured (labels and env are
        inherited from a known parent); any other instruction is a step that changes nothing."""
        self._call("build", request)
        dockerfile = Path(request.context) / "Dockerfile"
        steps = (
            _instructions(dockerfile.read_text(encoding="utf-8"))
            if dockerfile.is_file()
            else [("RUN", "true")] * self.build_steps
        )
        steps = _up_to_target(steps, request.target)
        labels: dict[str, str] = {}
        layers: list[str] = []
        env: list[str] = []
        stages: dict[str, tuple[dict, list, list]] = {}  # a named stage's state, for FROM NAME
        stage = None
        for n, (word, rest) in enumerate(steps, 1):
            if progress:
                progress.on_step(n, len(steps), f"{word} {rest}")
            if self.build_fails_at == n:
                raise BuildError(
                    f"The command '/bin/sh -c {rest}' returned a non-zero code: 1",
                    f"step {n}/{len(steps)}: {word} {rest}",
                    [f"output of step {n}"],
                    request.log_path,
                )
            if word == "FROM":  # build args (ARG BASE_IMAGE) expand in FROM, as in the engine
                if stage:
                    stages[stage] = (dict(labels), list(layers), list(env))
                words = rest.split()
                stage = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
                name = re.sub(r"\$\{?(\w+)\}?", lambda m: request.buildargs.get(m[1], m[0]), words[0])
                if name in request.contexts:  # a named build context stands for the stage or image
                    name = request.contexts[name].removeprefix("docker-image://")
                if name in stages:
                    labels, layers, env = (dict(stages[name][0]), list(stages[name][1]), list(stages[name][2]))
                    continue
                labels, layers, env = {}, [], []
                parent = self._resolve(name)
                if parent:
                    labels.update(self.store[parent]["labels"])
                    layers += self.store[parent]["layers"]
                    env = list(self.store[parent]["env"])
            elif word == "LABEL":  # build arguments given expand in values, as in the engine
                for pair in shlex.split(rest):
                    key, _, value = pair.partition("=")
                    labels[key] = re.sub(r"\$\{(\w+)\}", lambda m: request.buildargs.get(m[1], m[0]), value)
            elif word in ("RUN", "COPY", "ADD"):
                layers.append(_digest("layer", request.context, n, rest, sorted(request.buildargs.items())))
        image_id = self.add_image(labels=labels, layers=layers, env=env)
        if progress:
            progress.done(f"built {image_id[:19]} ({len(steps)} steps, 0 from cache)")
        return BuildResult(image_id, len(steps), 0.0, 0, request.log_path)

    def bake(self, jobs: list[BakeJob], progress: Progress) -> list[dict[str, str] | BuildError]:
        """Each job's targets built as build() builds (a target another one names in
        `contexts` first, and the name it stands for resolved to its image); per job,
        target -> image id, or the BuildError a failing build raised."""
        return [self._bake_one(job) for job in jobs]

    def _bake_one(self, job: BakeJob) -> dict[str, str] | BuildError:
        definition = job.definition
        self._call("bake", definition, list(job.targets), job.builder)
        if job.builder in self.bake_fails_on:
            return BuildError(f"bake failed on {job.builder}", step="step 5/9: RUN x", log_path=job.log_path)
        built: dict[str, str] = {}

        def one(name: str) -> str:
            if name not in built:
                target = definition["target"][name]
                args = dict(target.get("args", {}))
                for stands_for, source in target.get("contexts", {}).items():
                    dep = one(source.removeprefix("target:"))
                    args = {k: dep if v == stands_for else v for k, v in args.items()}
                request = BuildRequest(
                    context=Path(target["context"]),
                    buildargs=args,
                    log_path=job.log_path,
                    secrets={s.split(",")[0][3:]: Path(s.split("src=")[1]) for s in target.get("secret", [])},
                )
                built[name] = self.build(request).image_id
            return built[name]

        try:
            for name in job.targets:
                one(name)
        except BuildError as exc:
            return exc
        return built

    def tag(self, image_id: str, ref: str) -> None:
        self._call("tag", image_id, ref)
        target = self._resolve(image_id)
        if target is None:
            raise BuildError(f"the engine refused to tag {image_id} as {ref}")
        self.tags[_normal(ref)] = target

    def remove_image(self, ref: str) -> None:
        self._call("remove_image", ref)
        if _normal(ref) in self.tags:
            del self.tags[_normal(ref)]
        elif ref in self.store and ref not in self.tags.values():
            del self.store[ref]
        else:
            raise EngineError(
                f"No such image: {ref}"
                if self._resolve(ref) is None
                else f"conflict: unable to delete {ref} (must be forced)"
            )

    def run_capture(
        self,
        image: str,
        command: list[str],
        binds: dict[str, str] | None = None,
        timeout: int = 600,
        stdout_only: bool = False,
    ) -> tuple[int, str]:
        self._call("run_capture", image, list(command))
        if self._resolve(image) is None:
            raise UserError(f"no image '{image}' in the engine")
        return self.run_handler(image, list(command))

    def remove_container(self, container: str) -> None:
        self._call("remove_container", container)
        self.containers.discard(container)  # one that does not exist is no error

    def inspect(self, ref: str) -> dict[str, Any]:
        self._call("inspect", ref)
        return self._inspect(ref)

    def _inspect(self, ref: str) -> dict[str, Any]:
        image_id = self._resolve(ref)
        if image_id is None:
            raise UserError(f"no image '{ref}' in the engine")
        image = self.store[image_id]
        return {
            "Id": image_id,
            "RepoTags": [t for t, i in self.tags.items() if i == image_id],
            "Size": image["size"],
            "Config": {"Labels": dict(image["labels"]), "Env": list(image["env"])},
            "RootFS": {"Type": "layers", "Layers": list(image["layers"])},
        }

    def image_id(self, ref: str) -> str | None:
        self._call("image_id", ref)
        return self._resolve(ref)

    def image_labels(self, ref: str) -> dict[str, str]:
        self._call("image_labels", ref)
        return dict(self._inspect(ref)["Config"]["Labels"])

    def images(self, repository: str | None = None, label: str | None = None) -> list[ImageSummary]:
        self._call("images", repository, label)
        found = []
        for image_id, image in self.store.items():
            tags = [t for t, i in self.tags.items() if i == image_id]
            if repository and not any(split_ref(t)[0] == repository for t in tags):
                continue
            if label:
                key, has_value, value = label.partition("=")
                if key not in image["labels"] or (has_value and image["labels"][key] != value):
                    continue
            found.append(ImageSummary(image_id, tags, dict(image["labels"])))
        return found

    def login(self, username: str, password: str, registry: str) -> None:
        self._call("login", registry, username)  # never the password
        if registry in self.passwords and self.passwords[registry] != password:
            raise EngineError('Get "https://%s/v2/": unauthorized: incorrect username or password' % registry)

    def push(self, ref: str, auth: dict[str, str]) -> Iterator[dict[str, Any]]:
        self._call("push", ref, auth.get("username"))
        image_id = self._resolve(ref)
        if image_id is None:
            yield {"error": f"An image does not exist locally with the tag: {split_ref(ref)[0]}"}
            return
        if self.push_transient_failures > 0:
            self.push_transient_failures -= 1
            yield {"status": "Preparing", "id": "layer0"}
            yield {"error": self.push_error, "errorDetail": {"message": self.push_error}}
            return
        _, tag = split_ref(ref)
        for n, layer in enumerate(self.store[image_id]["layers"]):
            short = layer.removeprefix("sha256:")[:12]
            yield {
                "status": "Pushing",
                "id": short,
                "progressDetail": {"current": 100 * (n + 1), "total": 100 * (n + 1)},
            }
            yield {"status": "Pushed", "id": short}
        digest = _digest("manifest", image_id)
        self.pushed[ref] = digest
        yield {"status": f"{tag}: digest: {digest} size: 529"}

    def pull(self, ref: str) -> bool:
        self._call("pull", ref)
        if ref not in self.pullable:
            return False
        if self._resolve(ref) is None:
            self.add_image(ref)
        return True

    def import_rootfs(self, tar_path: Path, ref: str) -> str:
        self._call("import_rootfs", tar_path, ref)
        return self.add_image(ref, layers=[_digest("rootfs", str(tar_path))])
