"""Progress in non-TTY runs: a heartbeat line at least every 30 s while a step is silent.
A fake clock and stream; no engine."""

import io
import time

from builder.engine import HEARTBEAT_SECONDS, Progress, ProgressMode


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_silent_step_gets_a_heartbeat_every_30_seconds():
    clock, out = Clock(), io.StringIO()
    p = Progress("base", stream=out, clock=clock)
    assert HEARTBEAT_SECONDS == 30
    p.on_step(3, 9, "RUN apt-get install -y cuda-toolkit")
    beats = []
    for second in range(1, 181):  # three silent minutes, ticked every second
        clock.now = 1000.0 + second
        if p.tick():
            beats.append(second)
    assert beats == [30, 60, 90, 120, 150, 180]
    lines = out.getvalue().splitlines()
    assert lines[0] == "base +00:00 step 3/9: RUN apt-get install -y cuda-toolkit"
    assert lines[1] == "base +00:30 step 3/9: RUN apt-get install -y cuda-toolkit (still running)"
    assert lines[-1] == "base +03:00 step 3/9: RUN apt-get install -y cuda-toolkit (still running)"


def test_a_new_step_restarts_the_wait():
    clock, out = Clock(), io.StringIO()
    p = Progress("build", stream=out, clock=clock)
    p.on_step(1, 2, "FROM x")
    clock.now += 29
    p.on_step(2, 2, "RUN make")
    clock.now += 29
    assert not p.tick()
    clock.now += 1
    assert p.tick() and out.getvalue().endswith("build +00:59 step 2/2: RUN make (still running)\n")


def test_before_the_first_step_it_says_starting():
    clock, out = Clock(), io.StringIO()
    p = Progress("build", stream=out, clock=clock)
    clock.now += 30
    assert p.tick() and out.getvalue() == "build +00:30 starting (still running)\n"


def test_no_heartbeat_when_quiet_or_on_a_terminal():
    for p in (
        Progress("q", stream=io.StringIO(), mode=ProgressMode.QUIET, clock=Clock()),
        Progress("t", stream=Tty(), clock=Clock()),
    ):
        p.clock.now += 600
        assert not p.tick()


def test_the_heartbeat_thread_ticks_while_the_block_runs_and_stops_after():
    out = io.StringIO()
    p = Progress("x", stream=out, heartbeat_seconds=0.05)
    with p.heartbeat(poll=0.01):
        time.sleep(0.5)
    beats = out.getvalue().count("(still running)")
    assert beats >= 3
    time.sleep(0.2)
    assert out.getvalue().count("(still running)") == beats
