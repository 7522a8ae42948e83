"""The buildx runner's pure parts: its command line, and the rawjson stream of a real
build (captured from buildx 0.13.1 on Docker 26: FROM local/debian-rootfs:bullseye, then
`RUN echo hello-$RANDOM && echo to-stderr >&2` and `RUN echo second`) turned into steps."""

from pathlib import Path

from builder.engine import buildx

CAPTURE = (Path(__file__).parent / "data" / "buildx-rawjson-3-steps.txt").read_text()


def test_argv_never_tags_and_passes_secrets_by_file():
    req = buildx.BuildxRequest(
        Path("/ctx"),
        buildargs={"B": "2", "A": "1"},
        secrets={"builder-ca.crt": Path("/run/s/ca.crt")},
        target="release",
        builder="eng2",
        network="host",
        no_cache=True,
        contexts={"devel": "docker-image://r/tf:1", "a": "/x"},
    )
    assert buildx.argv(req, Path("/m.json")) == [
        "docker",
        "buildx",
        "build",
        "--progress=rawjson",
        "--provenance=false",
        "--sbom=false",
        "--metadata-file",
        "/m.json",
        "--output",
        "type=docker,compression=gzip,force-compression=true",
        "--file",
        "/ctx/Dockerfile",
        "--builder",
        "eng2",
        "--build-arg",
        "A=1",
        "--build-arg",
        "B=2",
        "--secret",
        "id=builder-ca.crt,src=/run/s/ca.crt",
        "--network",
        "host",
        "--target",
        "release",
        "--build-context",
        "a=/x",
        "--build-context",
        "devel=docker-image://r/tf:1",
        "--no-cache",
        "/ctx",
    ]
    assert not any(a in ("-t", "--tag") for a in buildx.argv(req, Path("/m.json")))


def test_objects_are_found_however_the_stream_is_cut():
    whole = list(buildx.json_objects([CAPTURE]))
    assert len(whole) == 25
    for size in (1, 7, 100, 4096):
        pieces = [CAPTURE[i : i + size] for i in range(0, len(CAPTURE), size)]
        assert list(buildx.json_objects(pieces)) == whole


def test_text_that_is_not_json_is_kept_as_the_error():
    objs = list(buildx.json_objects(['{"vertexes": []}\n', "ERROR: failed to solve: boom\n"]))
    assert objs[-1] == {"unparsed": "ERROR: failed to solve: boom"}
    assert buildx.Steps().feed(objs[-1])[0].kind == "error"


def test_the_capture_becomes_steps_logs_and_durations():
    steps, events = buildx.Steps(), []
    for obj in buildx.json_objects([CAPTURE]):
        events += steps.feed(obj)
    started = [e.step for e in events if e.kind == "step"]
    done = {e.step: e for e in events if e.kind == "done"}
    assert [s for s in started if not s.startswith("[internal]") and s.startswith("[")] == [
        "[1/3] FROM docker.io/local/debian-rootfs:bullseye",
        "[2/3] RUN echo hello-$RANDOM && echo to-stderr >&2",
        "[3/3] RUN echo second",
    ]
    assert len(started) == len(set(started))  # each step started once
    assert steps.cached_steps() == ["[1/3] FROM docker.io/local/debian-rootfs:bullseye"]
    assert [e.step for e in events if e.kind == "cached"] == steps.cached_steps()
    assert all(0 <= e.seconds < 60 for e in done.values())
    logs = [(e.step, e.text) for e in events if e.kind == "log"]
    assert ("[2/3] RUN echo hello-$RANDOM && echo to-stderr >&2", "to-stderr\n") in logs
    assert ("[3/3] RUN echo second", "second\n") in logs
    assert not [e for e in events if e.kind == "error"]


def test_durations_keep_sub_second_precision():
    assert (
        buildx._seconds("2026-11-25T13:15:59.681058046Z", "2026-11-25T13:16:01.181123991Z") == 1.500065
    )  # microseconds, truncated


def test_several_buildx_runs_are_read_as_they_come_and_one_failing_stops_no_other():
    """Two stand-in buildx processes at once (run_all: --builders bakes on several builders):
    the quick one's failure arrives while the slow one still runs, and the slow one finishes."""
    started = '{"vertexes": [{"digest": "sha256:a", "name": "[1/1] RUN slow", "started": "2026-01-01T00:00:00Z"}]}'
    completed = (
        '{"vertexes": [{"digest": "sha256:a", "name": "[1/1] RUN slow", "started": "2026-01-01T00:00:00Z",'
        ' "completed": "2026-01-01T00:00:02Z"}]}'
    )
    seen: list[tuple[str, str]] = []
    slow = buildx.Job(
        ["sh", "-c", f"echo '{started}' >&2; sleep 1.5; echo '{completed}' >&2"],
        lambda e: seen.append(("slow", e.kind)),
    )
    quick = buildx.Job(
        ["sh", "-c", "echo 'ERROR: failed to solve: boom' >&2; exit 1"], lambda e: seen.append(("quick", e.kind))
    )
    outcomes = buildx.run_all([slow, quick])
    assert isinstance(outcomes[0], buildx.Steps) and len(outcomes[0].done) == 1
    assert isinstance(outcomes[1], buildx.BuildError)
    assert outcomes[1].message == "buildx failed: ERROR: failed to solve: boom"
    assert seen.index(("quick", "error")) < seen.index(("slow", "done")), seen
