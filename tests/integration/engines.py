"""A second Docker engine the tests start and stop themselves: its own socket, data root,
exec root and network namespace (so its docker0 and iptables rules never touch the host's),
and its own daemon.json (never the machine's /etc/docker/daemon.json). Stopped by pid.

`in_host_netns=True` keeps it in the host's network namespace (it then reaches registries
on this machine's loopback, as the main engine does) with a bridge of its own on TEST-NET-2,
no iptables rules and no masquerading: its containers reach no network, and the host's
docker0 is never touched (checked on the way out)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path


def _answers(env: dict) -> bool:
    return subprocess.run(["docker", "info"], env=env, capture_output=True, timeout=20).returncode == 0


@contextmanager
def second_engine(
    config: dict, start_timeout: float = 60, in_host_netns: bool = False, daemon_env: dict[str, str] | None = None
):
    """Yields the environment (DOCKER_HOST) of a fresh dockerd configured with CONFIG
    (DAEMON_ENV: more of dockerd's own environment, e.g. SSL_CERT_FILE)."""
    root = Path(tempfile.mkdtemp(prefix="tfb-e2-", dir="/tmp"))  # short: unix socket paths are limited
    netns = f"tfb-{uuid.uuid4().hex[:8]}"
    if in_host_netns:
        bridge = netns  # 12 characters: within the 15 a link name may have
        subprocess.run(["ip", "link", "add", "name", bridge, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", "198.51.100.1/24", "dev", bridge], check=True)
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
        config = {**config, "bridge": bridge, "iptables": False, "ip-masq": False}
        enter: list[str] = []
    else:
        subprocess.run(["ip", "netns", "add", netns], check=True)
        subprocess.run(["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"], check=True)
        # nsenter --net, not `ip netns exec`: the latter remounts /sys, which hides the
        # cgroup mounts dockerd needs ("Devices cgroup isn't mounted").
        enter = ["nsenter", f"--net=/var/run/netns/{netns}"]
    (root / "daemon.json").write_text(json.dumps(config))
    env = {**os.environ, "DOCKER_HOST": f"unix://{root}/d.sock"}
    log = open(root / "dockerd.log", "w")
    proc = subprocess.Popen(
        [
            *enter,
            "dockerd",
            "--config-file",
            str(root / "daemon.json"),
            "--data-root",
            str(root / "data"),
            "--exec-root",
            str(root / "x"),
            "--pidfile",
            str(root / "pid"),
            "-H",
            env["DOCKER_HOST"],
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(daemon_env or {})},
    )
    try:
        deadline = time.monotonic() + start_timeout
        while not _answers(env):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the second engine did not start: {(root / 'dockerd.log').read_text()[-1500:]}")
            time.sleep(0.3)
        yield env
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()
        subprocess.run(["umount", "-R", "-l", str(root / "data")], capture_output=True)
        if in_host_netns:
            subprocess.run(["ip", "link", "del", netns], capture_output=True)
        else:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        if in_host_netns:
            assert subprocess.run(["ip", "link", "show", "docker0"], capture_output=True).returncode == 0, (
                "the second engine took the main engine's docker0 with it"
            )
