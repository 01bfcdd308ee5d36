"""Runs entry-point command lines, each in a process of its own, paying TensorFlow's import once.

A server process (this file) imports the third-party modules the entry points share, then forks
one child per command line; the child runs it as `python script args` (or `python -m module
args`, `python -c code args`) would: as `__main__`, with its folder first on sys.path, its
environment and working folder, stdin, stdout and stderr on files; it exits with the command's
status. Only modules that define no flags are imported before the fork, so each child parses
the command line of its own script alone. A fresh interpreter costs seconds of imports; a
child of the server, milliseconds.

`start` is `subprocess.Popen([sys.executable, ...])` with the output going to a log file, and
`run_python` is `subprocess.run([sys.executable, ...], capture_output=True)`, both through
servers kept for the session; `run_entry_points` runs a batch, a few at a time, through a server
of its own.
"""

import io
import itertools
import json
import os
import pathlib
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import time
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
        if name == "stderr" and case["stderr"] == case["stdout"]:
            # One file opened twice would have two offsets, each stream overwriting the other.
            os.dup2(1, 2)
            continue
        handle = os.open(case[name], mode, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    # The server's sys.stdin may hold read-ahead of its own pipe.
    sys.stdin = open(0, encoding=sys.stdin.encoding, errors=sys.stdin.errors, closefd=False)
    if os.environ.get("PYTHONUNBUFFERED"):
        # An interpreter reads this at its start, which for the child was the server's: without
        # it, what a killed child printed last would die in its buffer.
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=stream.encoding, errors=stream.errors,
                             write_through=True)
            for fd, stream in ((1, sys.stdout), (2, sys.stderr)))
    # A fresh interpreter seeds numpy's global generator from the OS; the children of one server
    # would all share the server's draws (`random` reseeds itself in a forked child).
    sys.modules["numpy"].random.seed()
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


def _fork(case, inherited=()) -> int:
    """Forks a child running `case`; it closes the `inherited` descriptors first."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd in inherited:
                os.close(fd)
            code = _child(case)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            # What atexit does in an interpreter that exits normally: the entry point's stderr
            # filter (dialoguecse_tf/cli/noise.py) passes on its last lines before the file is read.
            noise = sys.modules.get("dialoguecse_tf.cli.noise")
            if noise is not None:
                noise.finish()
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


def _answer(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _serve_forever() -> None:
    """Answers each request, a JSON line of stdin, with a JSON line on stdout:

    {"start": case} -> {"id": ..., "pid": ...}: forks a child running the case;
    {"wait": id, "timeout": seconds or null} -> {"returncode": ...}: the child's exit status, as
        Popen gives it (minus the number of the signal that killed it), null if it still runs after
        `timeout`;
    {"signal": id, "signum": ...} -> {}: signals the child, unless it has exited.

    Children are reaped as they exit, whatever is being asked; those still running when stdin
    ends are killed.
    """
    running = {}  # id -> (pid, pidfd)
    returncodes = {}  # id -> exit status, once reaped
    ids = itertools.count()
    waiting = None  # (id, deadline or None) of the wait request not answered yet
    unread = b""
    while True:
        timeout = None if waiting is None or waiting[1] is None else max(0.0, waiting[1] - time.monotonic())
        ready = select.select([0, *(pidfd for _, pidfd in running.values())], [], [], timeout)[0]
        for id_, (pid, pidfd) in list(running.items()):
            if pidfd in ready:
                returncodes[id_] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                os.close(pidfd)
                del running[id_]
        if 0 in ready:
            data = os.read(0, 1 << 16)
            if not data:
                break
            *lines, unread = (unread + data).split(b"\n")
            for request in map(json.loads, lines):
                if "start" in request:
                    id_, pid = next(ids), _fork(request["start"], [pidfd for _, pidfd in running.values()])
                    # The pid stays this child's until it is reaped here, so the pidfd is its.
                    running[id_] = (pid, os.pidfd_open(pid))
                    _answer({"id": id_, "pid": pid})
                elif "wait" in request:
                    deadline = None if request["timeout"] is None else time.monotonic() + request["timeout"]
                    waiting = (request["wait"], deadline)
                else:
                    if request["signal"] in running:
                        signal.pidfd_send_signal(running[request["signal"]][1], request["signum"])
                    _answer({})
        if waiting is not None and (waiting[0] in returncodes
                                    or waiting[1] is not None and time.monotonic() >= waiting[1]):
            _answer({"returncode": returncodes.get(waiting[0])})
            waiting = None
    for pid, pidfd in running.values():
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.waitpid(pid, 0)


class _Server:
    """A server process, asked one request at a time."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, start_new_session=True)

    def request(self, **message) -> dict:
        if self.process.poll() is not None:
            raise RuntimeError(f"the entry-point server exited with status {self.process.returncode}")
        try:
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline()
        except BaseException:
            # An answer left unread (Ctrl-C while waiting) would be taken for the next request's.
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            raise
        if not answer:
            raise RuntimeError(f"the entry-point server exited with status {self.process.wait()}")
        return json.loads(answer)


# The session's servers, started on first use and again if one died. Two, taken in turn by
# `start`: two commands started one after the other then hash strings differently, as two fresh
# interpreters would, and a test comparing their results still catches an order that hashing sets.
_SERVERS = {}
_TURNS = itertools.count()


def _server(index: int) -> _Server:
    if index not in _SERVERS or _SERVERS[index].process.poll() is not None:
        _SERVERS[index] = _Server()
    return _SERVERS[index]


class Started:
    """A command running in a child of a server: Popen's `args`, `pid`, `returncode`, `poll`,
    `wait` and `kill`, the child being the command's process itself."""

    def __init__(self, server: _Server, case: dict):
        self.args = [sys.executable, *case["argv"]]
        self.returncode = None
        self._server = server
        answer = server.request(start=case)
        self.pid, self._id = answer["pid"], answer["id"]

    def _returncode(self, timeout):
        if self.returncode is None:
            self.returncode = self._server.request(wait=self._id, timeout=timeout)["returncode"]
        return self.returncode

    def poll(self):
        return self._returncode(0)

    def wait(self, timeout=None) -> int:
        if self._returncode(timeout) is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self._server.request(signal=self._id, signum=signal.SIGKILL)


def _case(args, env, cwd, **streams) -> dict:
    return {"argv": [str(arg) for arg in args], "env": dict(os.environ if env is None else env),
            "cwd": str(cwd or os.getcwd()), **streams}


def start(args, log_path, *, env=None, cwd=None) -> Started:
    """`subprocess.Popen([sys.executable, *args], stdin=DEVNULL, stdout=log, stderr=STDOUT, ...)`,
    `log` being `log_path` opened for writing, through one of the session's servers."""
    log_path = str(log_path)
    # Both started before the first request, so that their imports overlap.
    servers = [_server(index) for index in range(2)]
    return Started(servers[next(_TURNS) % 2], _case(args, env, cwd, stdin=os.devnull, stdout=log_path,
                                                     stderr=log_path))


def run_python(args, *, text=False, input=None, env=None, cwd=None, timeout=None, check=False):
    """`subprocess.run([sys.executable, *args], capture_output=True, ...)` through the session's
    server. `args` starts with a script path, "-m" and a module, or "-c" and code."""
    with tempfile.TemporaryDirectory() as folder:
        streams = {name: os.path.join(folder, name) for name in ("stdin", "stdout", "stderr")}
        stdin = input.encode("utf-8") if isinstance(input, str) else input or b""
        pathlib.Path(streams["stdin"]).write_bytes(stdin)
        child = Started(_server(0), _case(args, env, cwd, **streams))
        try:
            returncode = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        stdout, stderr = (pathlib.Path(streams[name]).read_bytes() for name in ("stdout", "stderr"))
    if text:
        stdout, stderr = stdout.decode("utf-8"), stderr.decode("utf-8")
    completed = subprocess.CompletedProcess(child.args, returncode, stdout, stderr)
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
