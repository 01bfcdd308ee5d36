"""TensorFlow's known-harmless error lines, dropped from an entry point's stderr.

On a machine without a GPU every TensorFlow process prints `E ... failed call to cuInit: ...
CUDA error`, and on a CPU with AVX-512 evaluation adds `E ... oneDNN supports DT_INT64 only on
platforms with AVX-512`: error-level lines about nothing wrong, which bury the real ones. They
come from TensorFlow's C++ logging, which writes to file descriptor 2 directly, so
`drop_known_noise` puts a filter process between the descriptor and the terminal: it passes
every line on but those matching `KNOWN_HARMLESS`. A process of its own, not a thread: it drains
the pipe to its end whatever happens to the entry point, so a crash's last lines still arrive.
Child processes write into the same filter. `DIALOGUECSE_KEEP_TF_NOISE=1` keeps every line.
Progress bars, redrawn in place without ending their line, go to the terminal behind the filter
(`progress.draw_on`).
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys

KNOWN_HARMLESS = (
    "failed call to cuInit",
    "oneDNN supports DT_INT64 only on platforms with AVX-512",
)
_INSTALLED = "DIALOGUECSE_STDERR_FILTERED"
_KEEP = "DIALOGUECSE_KEEP_TF_NOISE"
_FILTER = (
    "import sys\n"
    "drop = tuple(s.encode() for s in sys.argv[1:])\n"
    "for line in sys.stdin.buffer:\n"
    "    if not any(s in line for s in drop):\n"
    "        sys.stdout.buffer.write(line)\n"
    "        sys.stdout.buffer.flush()\n"
)


_filter: tuple | None = None  # (the filter process, a descriptor of the stderr it writes to)


def drop_known_noise() -> None:
    """Routes this process's stderr (descriptor 2) through the filter; once per process tree.
    At exit (`finish`) the process's stderr is its own again and the filter is waited for, so
    whoever reads the stream after the process ended finds every line in it."""
    global _filter
    if _filter is not None or os.environ.get(_INSTALLED) or os.environ.get(_KEEP) == "1":
        return
    try:
        sys.stderr.flush()
        read_end, write_end = os.pipe()
        terminal = os.dup(2)
        process = subprocess.Popen([sys.executable, "-c", _FILTER, *KNOWN_HARMLESS], stdin=read_end,
                                   stdout=terminal, stderr=terminal, close_fds=True, start_new_session=True)
        os.dup2(write_end, 2)
        os.close(read_end)
        os.close(write_end)
    except OSError:
        return  # no pipe or process to spare: the lines stay, nothing else changes
    _filter = (process, terminal)
    os.environ[_INSTALLED] = "1"
    if os.isatty(terminal):
        # Here, not at the top: progress imports Keras, which the filter alone does not need.
        from dialoguecse_tf.progress import draw_on

        draw_on(os.fdopen(os.dup(terminal), "w"))
    atexit.register(finish)


def finish(timeout: float = 5.0) -> None:
    """Gives this process's stderr back to where it went and waits (at most `timeout` s) for the
    filter to pass on what it was given; a no-op without a filter."""
    global _filter
    if _filter is None:
        return
    process, terminal = _filter
    _filter = None
    sys.stderr.flush()
    os.dup2(terminal, 2)
    os.close(terminal)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass  # a child of this process still writes into the filter: it goes on without us
