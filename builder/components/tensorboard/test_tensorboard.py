"""TensorBoard's conformance tests: the catalog's version installed and labelled, and a
server on $TENSORBOARD_PORT that lists the run a TensorFlow summary writer just wrote."""

from __future__ import annotations

import json
import secrets
import shlex

import pytest

from builder.components.conformance import check_installed_and_labelled, tool_held, wait_for_http
from builder.components.tensorboard import TensorBoard


@pytest.fixture(scope="module")
def tensorboard(report, release_data, labels):
    return tool_held(TensorBoard, report, release_data, labels)


def test_tensorboard_is_the_catalogs_and_labelled(tensorboard, release_data, labels, report):
    check_installed_and_labelled(TensorBoard, tensorboard, release_data, labels, report)


def test_tensorboard_serves_a_log_dir_on_its_port(tensorboard, host, image_env):
    port = image_env["TENSORBOARD_PORT"]
    logs = f"/tmp/tb-{secrets.token_hex(4)}"
    write = (
        f"import tensorflow as tf\nw = tf.summary.create_file_writer('{logs}/run-a')\n"
        "with w.as_default():\n    [tf.summary.scalar('loss', 1.0 / (s + 1), step=s) for s in range(3)]\nw.flush()"
    )
    assert host.run(f"cd / && TF_CPP_MIN_LOG_LEVEL=2 python3 -c {shlex.quote(write)}").rc == 0
    host.run(
        f'sh -c \'tensorboard --logdir {logs} --bind_all --port "$TENSORBOARD_PORT" '
        f"> {logs}.log 2>&1 & echo $! > {logs}.pid'"
    )
    try:
        runs: list = []
        for _ in range(30):  # the first scan of the log directory may come after the server answers
            runs = json.loads(wait_for_http(host, f"http://127.0.0.1:{port}/data/runs"))
            if runs:
                break
            host.run("sleep 1")
        assert runs == ["run-a"], runs
    finally:
        host.run(f"kill $(cat {logs}.pid)")
