"""`forked_entry_points.start`: a handle on the command's own process, as subprocess.Popen gives."""

import os
import signal
import subprocess
import time

import pytest

from forked_entry_points import start

# A print that is not flushed: it reaches the log before a SIGKILL only if PYTHONUNBUFFERED works.
SLEEPER = "import os, time; print('pid', os.getpid()); time.sleep(60)"


def wait_for(log_path, text: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # The child creates its log after the fork, maybe after `start` returned.
        output = log_path.read_text(encoding="utf-8") if log_path.exists() else ""
        if text in output:
            return output
        time.sleep(0.01)
    raise AssertionError(f"{text!r} never reached the log: {output!r}")


@pytest.mark.slow
def test_kill_reaches_the_command_and_the_server_outlives_it(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    sleeper = start(["-c", SLEEPER], tmp_path / "sleeper.log", env=env)
    assert wait_for(tmp_path / "sleeper.log", "\n") == f"pid {sleeper.pid}\n"
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.05)
    sleeper.kill()
    assert sleeper.wait() == -signal.SIGKILL == sleeper.poll()
    # Reaped by its server: no zombie left behind.
    assert not os.path.exists(f"/proc/{sleeper.pid}")
    sleeper.kill()  # as Popen's, a no-op once the command has ended

    # Both servers serve on (starts alternate between them).
    for index in range(2):
        after = start(["-c", "print('still serving')"], tmp_path / f"after_{index}.log")
        assert after.wait() == 0
        assert (tmp_path / f"after_{index}.log").read_text(encoding="utf-8") == "still serving\n"


def test_exit_status_and_both_streams_reach_the_log(tmp_path):
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True); sys.exit(3)"
    child = start(["-c", code], tmp_path / "child.log", cwd=tmp_path)
    assert child.wait(timeout=60) == 3
    assert child.args[1:3] == ["-c", code]
    assert (tmp_path / "child.log").read_text(encoding="utf-8") == "out\nerr\n"
    failing = start(["-c", "raise ValueError('boom')"], tmp_path / "failing.log")
    assert failing.wait() == 1
    assert "ValueError: boom" in (tmp_path / "failing.log").read_text(encoding="utf-8")


def test_commands_started_in_turn_draw_differently(tmp_path):
    """As two fresh interpreters: string hashes (the servers') and numpy's global seed differ."""
    code = "import numpy; print(hash('dialogue'), numpy.random.randint(2**31))"
    children = [start(["-c", code], tmp_path / f"{index}.log") for index in range(3)]
    assert [child.wait() for child in children] == [0, 0, 0]
    hashes, draws = zip(*((tmp_path / f"{index}.log").read_text(encoding="utf-8").split() for index in range(3)))
    assert hashes[0] != hashes[1] and hashes[0] == hashes[2]
    assert len(set(draws)) == 3
