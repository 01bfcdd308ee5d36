"""Runs many entry-point command lines, each in a process of its own, paying TensorFlow's import once.

`run_entry_points` starts this file as a server process: it imports the third-party modules the
entry points share, then forks one child per command line, a few at a time; the child runs the
script as `python script args` would (`__main__`, its folder first on sys.path, stdin, stdout and
stderr on files) and exits with its status. Only modules that define no flags are imported
before the fork, so each child parses the command line of its own script alone. A fresh
interpreter per command costs seconds of imports; a child of the server, milliseconds.
"""

import json
import os
import pathlib
import runpy
import subprocess
import sys
import traceback

PRELOADED = ("numpy", "tensorflow", "keras", "keras_hub", "tensorflow_text")


def _child(case) -> int:
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY | os.O_TRUNC | os.O_CREAT),
                           (2, "stderr", os.O_WRONLY | os.O_TRUNC | os.O_CREAT)):
        handle = os.open(case[name], mode, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    argv = case["argv"]
    try:
        if argv[0] == "-m":
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


def _serve(cases_file: str, workers: int) -> None:
    """Runs the cases of `cases_file`; prints {"returncodes": [...]} as JSON."""
    for name in PRELOADED:
        __import__(name)
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


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
