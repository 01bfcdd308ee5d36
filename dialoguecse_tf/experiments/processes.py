"""The runner's child processes and its hold on a run folder.

A step's tool runs as a child process. The child dies with its runner: the kernel sends it
SIGTERM when the runner ends however it ends, SIGKILL included (Linux's parent-death signal),
and a SIGINT or SIGTERM the runner gets is passed on to it, so a stopped runner leaves no
trainer writing checkpoints behind it. The child's stderr goes to the terminal as before and to
the step's log file; when the child fails, the runner reports its last error line, the step and
the log in one line.

One runner at a time writes a run folder: `run_dir_lock` holds an exclusive lock on a file in
it for the whole run (released by the kernel when the runner ends, however it ends), and a
second runner into the same folder stops at once, naming the first one's process.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time

LOCK_FILE = ".runner.lock"
_PR_SET_PDEATHSIG = 1


class StepFailed(ValueError):
    """A step's tool exited with an error (its line, the step and the log are in the message)."""


@contextlib.contextmanager
def run_dir_lock(run_dir: str):
    """Holds `run_dir` for this process; ValueError at once when another process holds it."""
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, LOCK_FILE)
    handle = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ValueError(f"run folder {run_dir} is in use by {holder}: wait for it to end, or give another "
                             f"--run_dir") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"runner pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        yield
    finally:
        handle.close()


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent ends (Linux); a no-op elsewhere."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def run_command(argv: list[str], log_path: str | None, name: str) -> None:
    """Runs `argv`, its stderr shown and kept in `log_path` (None: shown only); StepFailed naming
    `name` on failure."""
    if log_path:
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    last_error = last_line = ""
    with open(log_path or os.devnull, "w", encoding="utf-8") as log:
        child = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, errors="replace",
                                 preexec_fn=_die_with_parent)
        forwarded = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}

        def forward(number, _frame):
            child.send_signal(number)

        in_main_thread = threading.current_thread() is threading.main_thread()
        if in_main_thread:
            for number in forwarded:
                signal.signal(number, forward)
        try:
            for line in child.stderr:
                sys.stderr.write(line)
                log.write(line)
                if line.startswith("error:"):
                    last_error = line.strip()
                elif line.strip():
                    last_line = line.strip()
            status = child.wait()
        finally:
            if in_main_thread:
                for number, handler in forwarded.items():
                    signal.signal(number, handler)
            if child.poll() is None:
                child.kill()
    if status:
        from dialoguecse_tf.evaluation.provenance import portable_path

        # The child's own error line, else (a crash) the last line it wrote.
        cause = last_error.removeprefix("error: ") or last_line or "no error line"
        where = f" (its log: {portable_path(log_path)})" if log_path else ""
        raise StepFailed(f"step {name} failed (exit status {status}): {cause}{where}")
