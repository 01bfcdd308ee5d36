"""dialoguecse_tf/experiments/processes.py: a step's child dies with its runner, a run folder has
one runner at a time, and a failing step ends in one line naming the step, its error and its log."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO_ROOT
from dialoguecse_tf.experiments.processes import StepFailed, run_command, run_dir_lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose: it runs no more code.
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_a_killed_runner_takes_its_step_with_it(tmp_path):
    """The runner SIGKILLed (no handler can run) while its step runs: the step's process ends too."""
    pid_file = tmp_path / "child.pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    runner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from dialoguecse_tf.experiments.processes import run_command
        run_command([sys.executable, "-c", {child!r}], {str(tmp_path / 'step.log')!r}, "sleeper")
    """)])
    deadline = time.time() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.time() < deadline and runner.poll() is None
        time.sleep(0.1)
    step = int(pid_file.read_text())
    assert _alive(step)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    deadline = time.time() + 10
    while _alive(step) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(step), "the step outlived its runner"


def test_a_failing_step_ends_in_one_line_with_its_error_and_log(tmp_path):
    log = tmp_path / "logs" / "train.log"
    script = "import sys; sys.stderr.write('I0000 some progress\\nerror: ValueError: bad flag --num_train_step\\n'); sys.exit(1)"
    with pytest.raises(StepFailed) as error:
        run_command([sys.executable, "-c", script], str(log), "train_seed1")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("step train_seed1 failed (exit status 1): ValueError: bad flag --num_train_step")
    assert str(log) in message or "train.log" in message
    assert "some progress" in log.read_text()
    # Without an error line (a crash), the last line the step wrote is the cause.
    with pytest.raises(StepFailed, match="boom"):
        run_command([sys.executable, "-c", "raise SystemExit('boom')"], str(log), "crash")
    run_command([sys.executable, "-c", "print('fine')"], str(log), "fine")


def test_a_second_runner_into_a_held_run_folder_stops_at_once(tmp_path):
    with run_dir_lock(str(tmp_path / "runs")):
        with pytest.raises(ValueError, match=rf"run folder .*runs is in use by runner pid {os.getpid()} since"):
            with run_dir_lock(str(tmp_path / "runs")):
                pass
    with run_dir_lock(str(tmp_path / "runs")):  # free again once the first ended
        pass
