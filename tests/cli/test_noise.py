"""dialoguecse_tf/cli/noise.py: TensorFlow's known-harmless error lines leave an entry point's
stderr, every other line (a real error, a crash's last words, a child's lines) stays."""

import os
import subprocess
import sys
import textwrap

from conftest import REPO_ROOT

SCRIPT = textwrap.dedent("""
    import os, subprocess, sys
    sys.path.insert(0, {repo!r})
    from dialoguecse_tf.cli.noise import drop_known_noise
    drop_known_noise()
    os.write(2, b"E0000 cuda_platform.cc:51] failed call to cuInit: INTERNAL: CUDA error: UNKNOWN ERROR (303)\\n")
    os.write(2, b"E0000 mkl_util.h:1] oneDNN supports DT_INT64 only on platforms with AVX-512. Falling back\\n")
    os.write(2, b"E0000 real.cc:7] a real TensorFlow error\\n")
    subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child line\\\\n')"])
    sys.stderr.write("error: ValueError: the entry point's own error\\n")
    sys.stderr.flush()
    {ending}
""")


def _run(ending, env=None):
    return subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO_ROOT), ending=ending)],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_known_lines_are_dropped_and_the_rest_kept():
    done = _run("sys.exit(1)", {"DIALOGUECSE_STDERR_FILTERED": "", "DIALOGUECSE_KEEP_TF_NOISE": ""})
    assert done.returncode == 1
    assert "cuInit" not in done.stderr and "DT_INT64" not in done.stderr
    assert done.stderr.splitlines() == ["E0000 real.cc:7] a real TensorFlow error", "child line",
                                        "error: ValueError: the entry point's own error"]


def test_a_crash_still_gets_its_last_lines_out():
    done = _run("os.write(2, b'last words before abort\\\\n'); os.abort()", {"DIALOGUECSE_STDERR_FILTERED": ""})
    assert done.returncode != 0 and "last words before abort" in done.stderr and "cuInit" not in done.stderr


def test_keep_noise_keeps_every_line():
    done = _run("sys.exit(0)", {"DIALOGUECSE_STDERR_FILTERED": "", "DIALOGUECSE_KEEP_TF_NOISE": "1"})
    assert "failed call to cuInit" in done.stderr
