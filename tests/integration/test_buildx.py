"""The buildx runner on the real engine (BuildKit in Docker 26): a small image on the
offline base, built without a tag, its steps and logs streamed; a failing step named with
its output; an interrupt that leaves no build running; every layer in the compression
asked for, even after a build of the same steps in another."""

import json
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
import uuid

import pytest

from builder.core.errors import BuildError
from builder.engine import buildx, image_archive

from .conftest import docker


def tags() -> set[str]:
    """The engine's tags (an untagged image, listed as <none>:<none>, is none)."""
    return set(docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()) - {"<none>:<none>"}


def known(digest: str) -> bool:
    return docker("image", "inspect", digest).returncode == 0


def context(tmp_path, base: str, run: str):
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nRUN {run}\n")
    return buildx.BuildxRequest(tmp_path)


def test_builds_untagged_with_steps_and_logs(offline_base, tmp_path):
    nonce = uuid.uuid4().hex[:12]
    before, events = tags(), []
    result = buildx.build(
        context(tmp_path, offline_base, f"echo {nonce} > /marker && echo built-{nonce}"),
        on_event=events.append,
        known=known,
    )
    assert docker("run", "--rm", "--entrypoint", "cat", result.image_id, "/marker").stdout.strip() == nonce
    assert tags() == before  # buildx was given no tag
    steps = [e.step for e in events if e.kind == "step"]
    assert f"[2/2] RUN echo {nonce} > /marker && echo built-{nonce}" in steps
    assert any(e.kind == "log" and f"built-{nonce}" in e.text for e in events)
    assert result.metadata["containerimage.config.digest"].startswith("sha256:")
    docker("rmi", result.image_id)


def test_a_failing_step_is_named_with_its_output(offline_base, tmp_path):
    nonce = uuid.uuid4().hex[:12]
    before = tags()
    with pytest.raises(BuildError) as exc:
        buildx.build(context(tmp_path, offline_base, f"echo about-to-fail-{nonce} && false"), known=known)
    assert exc.value.step == f"[2/2] RUN echo about-to-fail-{nonce} && false"
    assert f"about-to-fail-{nonce}" in "\n".join(exc.value.tail)
    assert "\n" not in str(exc.value)
    assert tags() == before


def test_an_interrupt_stops_the_build_in_the_engine(offline_base, tmp_path):
    nonce = uuid.uuid4().hex[:12]
    secs = 3000 + uuid.uuid4().int % 999  # the step's process: `sleep SECS`, unique
    context(tmp_path, offline_base, f"echo started-{nonce} && sleep {secs}")
    child = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from builder.engine import buildx
        from builder.core.errors import Interrupted
        def show(e):
            if e.kind == "log":
                print(e.text, end="", flush=True)
        try:
            buildx.build(buildx.BuildxRequest(Path({str(tmp_path)!r})), on_event=show)
        except Interrupted as exc:
            sys.exit(exc.exit_code)
    """)

    def step_running() -> bool:
        return subprocess.run(["pgrep", "-f", f"sleep {secs}"], capture_output=True).returncode == 0

    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # the RUN step is running in the engine
            if f"started-{nonce}" in line:
                break
        for _ in range(20):
            if step_running():
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the step never ran (builder exit {proc.poll()})")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        for _ in range(30):  # BuildKit cancels the step's process
            if not step_running():
                break
            time.sleep(1)
        else:
            pytest.fail("the interrupted step still runs in the engine")
        assert subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).returncode != 0, (
            "buildx left running"
        )
    finally:  # a failed assertion above must not leave a build running
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["pkill", "-f", str(tmp_path)], capture_output=True)  # buildx, in its own session
        subprocess.run(["pkill", "-f", f"sleep {secs}"], capture_output=True)


def layer_types(archive) -> list[str]:
    """The media types of the layers of the one image in ARCHIVE (an OCI layout tar)."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict:
            return json.load(tar.extractfile(image_archive.blob_path(digest)))

        manifest = blob(json.load(tar.extractfile("index.json"))["manifests"][0]["digest"])
    return [layer["mediaType"] for layer in manifest["layers"]]


def test_a_gzip_image_of_steps_a_zstd_build_made_is_all_gzip(tmp_path):
    """Unforced, BuildKit handed the gzip image the zstd blobs of the first build, under
    Docker's `rootfs.diff.tar.zstd`: an archive Docker's `docker load` refuses ("mismatched
    image rootfs and manifest layers", as CI saw with another builder's image). FROM
    scratch: none of these layers is in any other image of the run, so the engine holds no
    release layer in two compressions (RELIABILITY.md: the layer-cache export's memory)."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    for name in ("f", "g"):
        (ctx / name).write_text(uuid.uuid4().hex)
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY f /f\nCOPY g /g\n")
    types = {}
    for compression in ("zstd", "gzip"):
        archive = tmp_path / f"{compression}.tar"
        buildx.build(buildx.BuildxRequest(ctx, output_file=archive, compression=compression))
        types[compression] = layer_types(archive)
        assert image_archive.problems(archive) == [], compression
    assert types == {
        "zstd": ["application/vnd.oci.image.layer.v1.tar+zstd"] * 2,
        "gzip": ["application/vnd.docker.image.rootfs.diff.tar.gzip"] * 2,
    }
