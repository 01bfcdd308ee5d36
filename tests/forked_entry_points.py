"""Runs entry-point command lines, each in a process of its own, paying TensorFlow's import once.

A server process (this file) imports the third-party modules the entry points share, then forks
one child per command line; the child runs it as `python script args` (or `python -m module
args`, `python -c code args`) would: as `__main__`, with its folder first on sys.path, its
environment and working folder, stdin, stdout and stderr on files; it exits with the command's
status. Only modules that define no flags are imported before the fork, so each child parses
the command line of its own script alone. A fresh interpreter costs seconds of imports; a
child of the server, milliseconds.

`run_python` is `subprocess.run([sys.executable, ...], capture_output=True)` through one server
kept for the session; `run_entry_points` runs a batch, a few at a time, through a server of
its own.
"""

import json
import os
import pathlib
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import traceback

PRELOADED = ("numpy", "tensorflow", "keras", "keras_hub", "tensorflow_text")


def _child(case) -> int:
    if "env" in case:
        os.environ.clear()
        os.environ.update(case["env"])
    if "cwd" in case:
        os.chdir(case["cwd"])
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY | os.O_TRUNC | os.O_CREAT),
                           (2, "stderr", os.O_WRONLY | os.O_TRUNC | os.O_CREAT)):
        handle = os.open(case[name], mode, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    # The server's sys.stdin may hold read-ahead of its own pipe.
    sys.stdin = open(0, encoding=sys.stdin.encoding, errors=sys.stdin.errors, closefd=False)
    argv = case["argv"]
    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        elif argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
        return 0
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 (what an interpreter does with an uncaught exception)
        traceback.print_exc()
        return 1


def _fork(case) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _child(case)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def run_entry_points(commands, folder, workers: int, env: dict, cwd) -> list:
    """Runs [(argv, stdin bytes)] (argv: a script path or "-m", module, then the arguments), at
    most `workers` at a time, keeping their streams under `folder`; returns a CompletedProcess
    for each command, in order."""
    folder = pathlib.Path(folder)
    cases = []
    for index, (argv, stdin) in enumerate(commands):
        streams = {name: str(folder / f"{index}.{name}") for name in ("stdin", "stdout", "stderr")}
        pathlib.Path(streams["stdin"]).write_bytes(stdin)
        cases.append({"argv": list(argv), **streams})
    (folder / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    server = subprocess.run([sys.executable, __file__, str(folder / "cases.json"), str(workers)], capture_output=True,
                            stdin=subprocess.DEVNULL, env=env, cwd=cwd, timeout=1800)
    assert server.returncode == 0, server.stderr.decode("utf-8", errors="replace")[-4000:]
    returncodes = json.loads(server.stdout.decode("utf-8").splitlines()[-1])["returncodes"]
    return [subprocess.CompletedProcess(case["argv"], returncode, pathlib.Path(case["stdout"]).read_bytes(),
                                        pathlib.Path(case["stderr"]).read_bytes())
            for case, returncode in zip(cases, returncodes)]


def _serve_batch(cases_file: str, workers: int) -> None:
    """Runs the cases of `cases_file`; prints {"returncodes": [...]} as JSON."""
    with open(cases_file, encoding="utf-8") as reader:
        cases = json.load(reader)
    returncodes = [None] * len(cases)
    running = {}
    pending = list(range(len(cases)))
    while pending or running:
        while pending and len(running) < workers:
            index = pending.pop(0)
            running[_fork(cases[index])] = index
        pid, status = os.wait()
        returncodes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    print(json.dumps({"returncodes": returncodes}))


def _serve_forever() -> None:
    """Runs one case per line of stdin, answering each with a line {"returncode": ...} on stdout."""
    for line in sys.stdin:
        _, status = os.waitpid(_fork(json.loads(line)), 0)
        sys.stdout.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


class _Server:
    """The session's server, started on first use and again after a command ran past its timeout."""

    process = None

    @classmethod
    def run(cls, case: dict, timeout):
        if cls.process is None or cls.process.poll() is not None:
            cls.process = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           text=True, start_new_session=True)
        cls.process.stdin.write(json.dumps(case) + "\n")
        cls.process.stdin.flush()
        if not select.select([cls.process.stdout], [], [], timeout)[0]:
            os.killpg(cls.process.pid, signal.SIGKILL)
            cls.process.wait()
            raise subprocess.TimeoutExpired(case["argv"], timeout)
        answer = cls.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the entry-point server exited with status {cls.process.wait()}")
        return json.loads(answer)["returncode"]


def run_python(args, *, text=False, input=None, env=None, cwd=None, timeout=None, check=False):
    """`subprocess.run([sys.executable, *args], capture_output=True, ...)` through the session's
    server. `args` starts with a script path, "-m" and a module, or "-c" and code."""
    with tempfile.TemporaryDirectory() as folder:
        streams = {name: os.path.join(folder, name) for name in ("stdin", "stdout", "stderr")}
        stdin = input.encode("utf-8") if isinstance(input, str) else input or b""
        pathlib.Path(streams["stdin"]).write_bytes(stdin)
        case = {"argv": [str(arg) for arg in args], "env": dict(os.environ if env is None else env),
                "cwd": str(cwd or os.getcwd()), **streams}
        returncode = _Server.run(case, timeout)
        stdout, stderr = (pathlib.Path(streams[name]).read_bytes() for name in ("stdout", "stderr"))
    if text:
        stdout, stderr = stdout.decode("utf-8"), stderr.decode("utf-8")
    completed = subprocess.CompletedProcess([sys.executable, *case["argv"]], returncode, stdout, stderr)
    if check:
        completed.check_returncode()
    return completed


if __name__ == "__main__":
    for _name in PRELOADED:
        __import__(_name)
    if len(sys.argv) == 3:
        _serve_batch(sys.argv[1], int(sys.argv[2]))
    else:
        _serve_forever()
