"""The BuildKit backend's pure parts: buildx events onto the progress line and into the
log file (with the markers bench/ reads), image ids given a temporary tag for BuildKit,
the backend switch. The builds themselves run on the real engine (integration tests)."""

import io

import pytest

from bench.run import step_seconds, vertex_seconds
from builder.core.errors import UserError
from builder.core.redact import register_secret
from builder.engine import Progress
from builder.engine import buildkit_engine as bk
from builder.engine.buildx import Event
from tests.unit.fake_engine import FakeEngine


def progress(stream: io.StringIO) -> Progress:
    ticks = iter(range(0, 1000, 5))
    return Progress("21.08/tf2-py3", stream=stream, clock=lambda: float(next(ticks)))


def test_numbered_steps_reach_the_progress_line_and_internal_vertexes_do_not():
    out, log = io.StringIO(), io.StringIO()
    p = progress(out)
    for event in (
        Event("step", "[internal] load build definition from Dockerfile"),
        Event("step", "[ 3/18] RUN ./nvbuild.sh --only horovod"),
        Event("step", "[stage-1 2/5] COPY a /b"),
    ):
        bk.record(event, p, log)
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "step 3/18: RUN ./nvbuild.sh --only horovod",
        "step 2/5: COPY a /b",
    ]
    assert log.getvalue().splitlines()[0].startswith("#builder-vertex at ")


def test_the_log_has_step_markers_that_the_bench_splits_by():
    log = io.StringIO()
    p = progress(io.StringIO())
    for event in (
        Event("step", "[1/3] FROM base"),
        Event("done", "[1/3] FROM base", seconds=0.1),
        Event("cached", "[1/3] FROM base"),
        Event("step", "[2/3] RUN make"),
        Event("log", "[2/3] RUN make", "compiling\n"),
        Event("done", "[2/3] RUN make", seconds=9.0),
        Event("step", "[3/3] COPY x /x"),
    ):
        bk.record(event, p, log)
    text = log.getvalue()
    assert "compiling\n" in text and "#builder-done 2/3 at " in text
    assert [line for line in text.splitlines() if line.startswith("#builder-cached")] == [
        "#builder-cached 1/3: FROM base"
    ]
    # BuildKit's own durations where a step finished, in the order they finished
    assert step_seconds(text) == [("FROM base", 0.1), ("RUN make", 9.0)]
    # without them (a legacy log), the time between the step markers
    assert vertex_seconds(text, "exporting to image") == 0.0
    for event in (Event("step", "exporting to image"), Event("done", "exporting to image", seconds=93.3)):
        bk.record(event, p, log)
    assert vertex_seconds(log.getvalue(), "exporting to image") == 93.3  # the bench's export figure
    steps = step_seconds("\n".join(line for line in text.splitlines() if not line.startswith("#builder-done")))
    assert [name for name, _ in steps] == ["FROM base", "RUN make", "COPY x /x"]
    assert all(sec > 0 for _, sec in steps[:2])


def test_credentials_in_step_output_never_reach_the_log():
    register_secret("tok-unit-9f8e7d")
    log = io.StringIO()
    p = progress(io.StringIO())
    bk.record(Event("step", "[2/2] RUN fetch https://u:tok-unit-9f8e7d@mirror/x"), p, log)
    bk.record(Event("log", "[2/2] RUN fetch", "GET https://u:tok-unit-9f8e7d@mirror/x\n"), p, log)
    bk.record(Event("error", "[2/2] RUN fetch", "401 for tok-unit-9f8e7d"), p, log)
    assert "tok-unit-9f8e7d" not in log.getvalue()
    assert log.getvalue().count("\n") == 3


def test_an_image_id_base_gets_a_temporary_tag_that_is_removed_after():
    engine = FakeEngine()
    image = engine.add_image("local/parent:1")
    before = dict(engine.tags)
    with bk.base_by_tag(engine, {"BASE_IMAGE": image, "BUILD_ID": "x"}) as args:
        assert args["BASE_IMAGE"] != image and args["BUILD_ID"] == "x"
        assert engine.image_id(args["BASE_IMAGE"]) == image  # resolvable by name while building
    assert engine.tags == before  # only the temporary tag went away
    assert engine.image_id(image) == image


@pytest.mark.parametrize("base", ["local/parent:1", "registry:5000/ml/tf:21.08", "deadbeefcafe", ""])
def test_a_base_given_by_name_is_passed_as_it_is(base):
    engine = FakeEngine()
    with bk.base_by_tag(engine, {"BASE_IMAGE": base}) as args:
        assert args == {"BASE_IMAGE": base}
    assert engine.names() == []


def test_the_backend_switch(monkeypatch):
    monkeypatch.delenv("BUILDER_BACKEND", raising=False)
    assert bk.backend_wanted() == "buildkit"
    monkeypatch.setenv("BUILDER_BACKEND", "legacy")
    assert bk.backend_wanted() == "legacy"
    monkeypatch.setenv("BUILDER_BACKEND", "kaniko")
    with pytest.raises(UserError, match="BUILDER_BACKEND='kaniko': use one of buildkit, legacy"):
        bk.backend_wanted()


@pytest.mark.parametrize(
    "name,label",
    [
        (
            "[12/18] RUN --mount=type=cache,id=tfbuilder-nvbuild-ccache,target=/var/cache/nvbuild ./nvbuild.sh --sm 8.6",
            "step 12/18: RUN ./nvbuild.sh --sm 8.6",
        ),
        ("[stage-1 2/5] COPY a /b", "step 2/5: COPY a /b"),
        ("[internal] load build context", "[internal] load build context"),
        ("", ""),
    ],
)
def test_a_failing_step_is_named_as_the_legacy_builder_named_it(name, label):
    assert bk.step_label(name) == label


def test_each_bench_step_needle_finds_exactly_one_step_of_the_release_dockerfile():
    """bench/run.py splits a build log by step text (the builder's mounts left out, as
    record() writes it); a needle that matches no step, or two, makes a figure wrong."""
    from bench.run import STEP
    from builder.core import paths
    from builder.core.contract import BUILDER_MOUNT
    from tests.unit.dockerfile_lexer import instructions

    text = (paths.project_root() / "dockerfiles" / "21.08" / "tf2-py3.Dockerfile").read_text()
    runs = [f"RUN {BUILDER_MOUNT.sub('', i.args).lstrip()}" for i in instructions(text) if i.cmd == "RUN"]
    what = {"toolchain": "apt-get install", "wheels": "pip install", "horovod": "nvbuild.sh", "extension": "nvbuild.sh"}
    assert set(STEP) == set(what)
    for name, needle in STEP.items():
        found = [r for r in runs if needle in r]
        assert len(found) == 1 and what[name] in found[0], (name, needle, found)  # the one step, and the right one
