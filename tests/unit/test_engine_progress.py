"""--progress auto|plain|quiet|rawjson (Docker's names) on both backends: the Progress
object, the legacy builder's stream (a fake engine API) and buildx's rawjson events. No
engine."""

from __future__ import annotations

import base64
import io
import json

import pytest

from builder.core.errors import UserError
from builder.core.redact import register_secret
from builder.engine import BuildRequest, DockerEngine, Progress, ProgressMode, buildkit_engine, buildx, progress_mode


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def clock():
    return 0.0


def test_the_modes_are_one_type_parsed_once():
    modes = [progress_mode(v) for v in ("auto", "plain", "quiet", "rawjson")]
    assert modes == [ProgressMode.AUTO, ProgressMode.PLAIN, ProgressMode.QUIET, ProgressMode.RAWJSON]
    assert modes == ["auto", "plain", "quiet", "rawjson"] and [str(m) for m in modes] == modes
    with pytest.raises(UserError, match="--progress 'tty': use one of auto, plain, quiet, rawjson"):
        progress_mode("tty")


def test_plain_prints_step_and_log_lines_even_on_a_terminal():
    register_secret("s3cr3t-value")
    out = Tty()
    p = Progress("build", stream=out, mode=ProgressMode.PLAIN, clock=clock)
    p.on_step(1, 2, "RUN make")
    p.on_log("compiling with s3cr3t-value")
    p.on_raw({"status": "x"})
    p.done("built")
    text = out.getvalue()
    assert "\r" not in text and text.splitlines() == [
        "build +00:00 step 1/2: RUN make",
        "compiling with ***",
        "build +00:00 built",
    ]


@pytest.mark.parametrize("mode", ["quiet", "rawjson"])
def test_quiet_and_rawjson_print_no_lines_of_their_own(mode):
    out = io.StringIO()
    p = Progress("build", stream=out, mode=ProgressMode(mode), clock=clock)
    p.on_step(1, 2, "RUN make")
    p.on_log("compiling")
    assert not p.tick() and p.silent
    p.done("built")
    p.on_raw({"stream": "Step 1/2 : RUN make\n"})
    lines = out.getvalue().splitlines()
    assert lines == ([] if mode == "quiet" else ['{"stream":"Step 1/2 : RUN make\\n"}'])


def test_auto_is_todays_default():
    out = io.StringIO()
    p = Progress("build", stream=out, clock=clock)
    p.on_step(1, 2, "RUN make")
    p.on_log("compiling")
    p.on_raw({"a": 1})
    assert out.getvalue() == "build +00:00 step 1/2: RUN make\n" and p.mode == "auto"


class StreamAPI:
    """A legacy build's stream: two steps and their output."""

    def build(self, **kw):
        yield {"stream": "Step 1/2 : FROM base:1\n"}
        yield {"stream": " ---> 1111111111aa\n"}
        yield {"stream": "Step 2/2 : RUN make\n"}
        yield {"stream": "cc -o app app.c\n"}
        yield {"aux": {"ID": "sha256:" + "a" * 64}}
        yield {"stream": "Successfully built aaaaaaaaaaaa\n"}


@pytest.mark.parametrize("mode", ["plain", "rawjson"])
def test_the_legacy_builder_honours_plain_and_rawjson(tmp_path, mode):
    engine = object.__new__(DockerEngine)
    engine.api = StreamAPI()
    out = io.StringIO()
    result = engine.build(
        BuildRequest(context=tmp_path), Progress("b", stream=out, mode=ProgressMode(mode), clock=clock)
    )
    assert result.image_id == "sha256:" + "a" * 64
    lines = out.getvalue().splitlines()
    if mode == "plain":
        assert "cc -o app app.c" in lines and "b +00:00 step 2/2: RUN make" in lines
    else:
        objs = [json.loads(line) for line in lines]  # nothing but the engine's messages
        assert len(objs) == 6 and objs[3] == {"stream": "cc -o app app.c\n"} and objs[4]["aux"]["ID"]


def test_buildx_objects_reach_rawjson_redacted_and_plain_as_log_lines():
    register_secret("hunter2-pw")
    data = base64.b64encode(b"token hunter2-pw\n").decode()
    obj = {
        "vertexes": [{"digest": "sha256:a", "name": "[1/1] RUN make", "started": "2026-01-01T00:00:00Z"}],
        "logs": [{"vertex": "sha256:a", "data": data}],
    }
    for mode in ("rawjson", "plain"):
        out = io.StringIO()
        progress = Progress("b", stream=out, mode=ProgressMode(mode), clock=clock)
        job = buildx.Job([], lambda event, progress=progress: buildkit_engine.record(event, progress, None))
        job.feed(obj)
        text = out.getvalue()
        assert "hunter2-pw" not in text
        if mode == "rawjson":
            (line,) = text.splitlines()
            shown = json.loads(line)
            assert shown["vertexes"] == obj["vertexes"]
            assert base64.b64decode(shown["logs"][0]["data"]) == b"token ***\n"
        else:
            assert text.splitlines() == ["b +00:00 step 1/1: RUN make", "token ***"]


def test_a_progress_mode_is_one_type():
    """The mode is parsed once (progress_mode) and carried as a ProgressMode; no other spelling."""
    assert Progress("p", mode=ProgressMode.QUIET).silent and Progress("p", mode=ProgressMode.RAWJSON).silent
    assert not Progress("p", mode=ProgressMode.PLAIN).silent
    with pytest.raises(TypeError):
        Progress("p", quiet=True)  # type: ignore[call-arg]
