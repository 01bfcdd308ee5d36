"""Runs a planned experiment: every run not reused, in order, then its results folder.

The results folder gets what each step declares (`results`, kept train logs, evaluation
parts; a whole run removes a kept log of a run the experiment no longer declares),
`stage_seconds.tsv` (every run's wall seconds, reused ones marked with the seconds they
took when they ran, and a training run that resumed from a stopped attempt's checkpoints marked:
its seconds are that last attempt's), `experiment.json` (parameters, seeds, rows and steps asked for, and every run with its key,
status and command: what `experiments.staleness` checks) and `command.txt` (the command, the
commit and the total wall time). An evaluation part's folder gets the same three files for the
runs behind it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import time

from absl import logging

from dialoguecse_tf.evaluation.provenance import git_commit, portable_path, utc_now
from dialoguecse_tf.experiments.plan import STEP_FILE, Planner, Run
from dialoguecse_tf.experiments.processes import run_command, run_dir_lock
from dialoguecse_tf.experiments.tools import ask_for_script_flags, check_flags, missing_inputs, remove_output
from dialoguecse_tf.io_utils import write_json

SUITE_FILE = "suite.json"
LOG_DIR = "logs"
EXPERIMENT_FILE = "experiment.json"


def describe_plan(planner: Planner) -> str:
    """One line per run: status, name, key, tool and folder (what --dry_run prints)."""
    lines = [f"experiment {planner.spec.name}: {len(planner.order)} runs "
             f"({sum(run.status in ('reuse', 'link') for run in planner.order)} reused)"]
    for run in planner.order:
        source = f" <- {portable_path(run.reuse_from)}" if run.status == "link" else ""
        lines.append(f"  {run.status:<6} {run.name:<40} {run.key:<16} {run.step.tool:<19} "
                     f"{portable_path(run.output_dir)}{source}")
    return "\n".join(lines)


def check_plan(planner: Planner) -> None:
    """What can be checked before anything runs, in one line: every step's flags are its tool's
    (training and evaluation were checked when their keys were computed), and every file or
    glob a step reads that no step of the experiment writes matches something."""
    missing = []
    ask_for_script_flags(planner.order)
    for run in planner.order:
        check_flags(run)
        missing += [f"{run.step.name}: {path}" for path in missing_inputs(run, (planner.run_dir, planner.results_dir))]
    if missing:
        raise ValueError(f"{len(missing)} inputs match nothing: {'; '.join(dict.fromkeys(missing))}")


def command_line(run: Run) -> list[str]:
    """The run's command; what the log and experiment.json record (with `python` for the interpreter)."""
    flags = dict(run.flags)
    if run.tool.needs_models:
        names, checkpoints, protocols = zip(*run.models)
        flags.update(checkpoint=",".join(checkpoints), model_name=",".join(names),
                     eval_suite=os.path.join(run.output_dir, SUITE_FILE))
        if any(protocols):
            if not all(protocols):
                raise ValueError(f"step {run.step.name}: give every model a protocol or none")
            flags["dialogue_protocol"] = ",".join(protocols)
    return run.tool.command(flags, run.inputs, run.output_dir)


def run_experiment(planner: Planner, invocation: str) -> list[dict]:
    """Runs what the plan does not reuse and writes the results folder; returns the runs' records.

    The run folder is held for the whole run (`processes.run_dir_lock`) when a step writes in it:
    a second runner into it stops at once. Each such step's log is `<run_dir>/logs/<run>.log`."""
    writes = any(run.tool.cached and run.status != "reuse" for run in planner.order)
    with run_dir_lock(planner.run_dir) if writes else contextlib.nullcontext():
        return _run_experiment(planner, invocation, planner.rows_suffix)


def _run_experiment(planner: Planner, invocation: str, suffix: str) -> list[dict]:
    results_dir = planner.results_dir
    os.makedirs(results_dir, exist_ok=True)
    started = time.time()
    # The commit the runs start from: a long run's results are labelled with it even if the
    # repository moves on before they are written.
    commit = git_commit() or "unknown"
    records = []
    for run in planner.order:
        if run.status == "link":
            remove_output(run.output_dir)
            os.makedirs(os.path.dirname(os.path.abspath(run.output_dir)), exist_ok=True)
            os.symlink(os.path.relpath(run.reuse_from, os.path.dirname(os.path.abspath(run.output_dir))),
                       run.output_dir)
        if run.status in ("reuse", "link"):
            with open(os.path.join(run.output_dir, STEP_FILE), encoding="utf-8") as f:
                step = json.load(f)
            seconds, resumed = step.get("seconds"), step.get("resumed", False)
            logging.info("=== %s: reusing %s", run.name, portable_path(run.reuse_from or run.output_dir))
        else:
            if run.status == "rerun":
                remove_output(run.output_dir)
            # A stopped attempt's files are there and the tool goes on from them: this attempt's
            # seconds are not the run's.
            resumed = run.tool.resumes and os.path.isdir(run.output_dir) and bool(os.listdir(run.output_dir))
            logging.info("=== [%s] %s%s", time.strftime("%H:%M:%S"), run.name,
                         " (files of a stopped attempt are there)" if resumed else "")
            planner.rekey(run)
            start = time.time()
            log = os.path.join(planner.run_dir, LOG_DIR, planner.folder_name(run.step, run.name) + ".log")
            _execute(run, log if run.tool.cached else None)
            seconds = round(time.time() - start)
            if run.tool.cached:
                write_json(os.path.join(run.output_dir, STEP_FILE),
                           {"key": run.key, "tool": run.step.tool, "seconds": seconds, "resumed": resumed,
                            "finished": utc_now()})
            logging.info("--- %s done in %d s (experiment running for %d s)", run.name, seconds,
                         time.time() - started)
        records.append({"run": run.name, "tool": run.step.tool, "key": run.key, "status": run.status,
                        "seconds": seconds, "resumed": resumed, "command": _portable_command(run)})
        _collect(planner, run, records, invocation, commit, suffix)
    # A run that only evaluated parts leaves the folder's own records (those of its last merge) alone.
    if any(run.tool.writes_results or run.step.results.as_dict() or run.step.keep_train_log for run in planner.order):
        _drop_undeclared_train_logs(planner)
        _write_records(planner, records, invocation, commit, round(time.time() - started))
    logging.info("runs under %s; results in %s: %s", portable_path(planner.run_dir), portable_path(results_dir),
                 ", ".join(sorted(os.listdir(results_dir))))
    return records


def _execute(run: Run, log_path: str | None) -> None:
    if run.tool.in_process:
        run.tool.in_process(run.flags, run.inputs, run.output_dir)
    else:
        if run.tool.needs_models:
            os.makedirs(run.output_dir, exist_ok=True)
            write_json(os.path.join(run.output_dir, SUITE_FILE), run.suite)
        run_command(command_line(run), log_path, run.name)


def _portable_command(run: Run) -> str:
    if not run.tool.script:
        return shlex.join([run.step.tool] + [f"{name}={portable_argument(str(value))}"
                                             for name, value in run.flags.items()]
                         + [portable_argument(path) for path in run.inputs])
    return shlex.join(["python"] + [portable_argument(argument) for argument in command_line(run)[1:]])


def portable_argument(argument: str) -> str:
    """An argument with absolute paths in it made relative to the repository.

    `NAME=VALUE` (a flag, or a labelled input) is made portable in its value; a value may be a
    comma-separated list (`--checkpoint=a,b`), each item its own path.
    """
    name, sep, value = argument.partition("=")
    if sep:
        return f"{name}={_portable_list(value)}"
    return _portable_list(argument)


def _portable_list(value: str) -> str:
    return ",".join(portable_path(item) if os.path.isabs(item) else item for item in value.split(","))


def _collect(planner: Planner, run: Run, records: list, invocation: str, commit: str, suffix: str) -> None:
    """Copies what the step declares into the results folder."""
    results_dir = planner.results_dir
    if run.step.keep_train_log:
        os.makedirs(os.path.join(results_dir, "train_logs"), exist_ok=True)
        shutil.copyfile(os.path.join(run.output_dir, "train_log.jsonl"),
                        os.path.join(results_dir, "train_logs", f"{run.name}.jsonl"))
    for target, source in run.step.results.as_dict().items():
        destination = os.path.join(results_dir, target)
        os.makedirs(os.path.dirname(destination) or ".", exist_ok=True)
        shutil.copyfile(os.path.join(run.output_dir, source), destination)
    if run.step.part:
        part_dir = os.path.join(results_dir, "parts", run.step.part + suffix)
        os.makedirs(part_dir, exist_ok=True)
        shutil.copyfile(os.path.join(run.output_dir, "results.json"), os.path.join(part_dir, "results.json"))
        needed = _upstream(planner, run)
        part_records = [record for record in records if record["run"] in needed]
        _write_timings(os.path.join(part_dir, "stage_seconds.tsv"), part_records)
        _write_experiment(os.path.join(part_dir, EXPERIMENT_FILE), planner, part_records)
        _write_command(os.path.join(part_dir, "command.txt"), invocation, commit,
                       [f"this part's runs: {', '.join(record['run'] for record in part_records)}"])


def declared_train_logs(planner: Planner) -> set[str]:
    """The file names under `{results_dir}/train_logs/` the experiment's steps keep.

    Args:
      planner: the planned experiment; every step and seed it declares counts, whichever of them
        this invocation runs.

    Returns:
      the names, `<run>.jsonl`.
    """
    return {f"{run.name}.jsonl" for step in planner.spec.steps if step.keep_train_log
            for run in planner.runs[step.name]}


def _drop_undeclared_train_logs(planner: Planner) -> None:
    # A run the experiment no longer declares (renamed, or its variant dropped) leaves its log
    # behind, where it reads as part of the rerun result. Only a whole run rewrites the folder's
    # table: a partial one (`--only`, `--rows`, perhaps with other `--seeds`) leaves the logs the
    # table still quotes.
    folder = os.path.join(planner.results_dir, "train_logs")
    if planner.only or planner.rows or not os.path.isdir(folder):
        return
    declared = declared_train_logs(planner)
    for name in sorted(os.listdir(folder)):
        if name.endswith(".jsonl") and name not in declared:
            os.remove(os.path.join(folder, name))
            logging.warning("removed %s: no run of %s keeps a train log of that name",
                            portable_path(os.path.join(folder, name)), planner.spec.name)


def _upstream(planner: Planner, run: Run) -> set:
    by_name = {r.name: r for r in planner.order}
    needed, stack = set(), [run.name]
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack.extend(by_name[name].needs)
    return needed


def _write_timings(path: str, records: list) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            seconds = record["seconds"] if record["seconds"] is not None else "?"
            reused = " (reused)" if record["status"] in ("reuse", "link") else ""
            resumed = " (this attempt only: it resumed a stopped one)" if record["resumed"] else ""
            f.write(f"{record['run']}\t{seconds}{reused}{resumed}\n")


def _write_command(path: str, invocation: str, commit: str, notes: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# produced by:\n{invocation}\n# commit: {commit}\n")
        for note in notes:
            f.write(f"# {note}\n")


def experiment_record(planner: Planner, records: list) -> dict:
    """What a results folder records of the runs behind it: enough to plan them again."""
    return {
        "experiment": planner.spec.name, "params": planner.spec.params.as_dict(),
        "seeds": list(planner.spec.seeds), "rows": planner.rows, "only": planner.only,
        "run_dir": portable_path(planner.run_dir), "results_dir": portable_path(planner.results_dir),
        "external_digests": dict(sorted(planner.external_digests.items())),
        "runs": records,
    }


def _write_experiment(path: str, planner: Planner, records: list) -> None:
    write_json(path, experiment_record(planner, records))


def _write_records(planner: Planner, records: list, invocation: str, commit: str, seconds: int) -> None:
    results_dir = planner.results_dir
    _write_timings(os.path.join(results_dir, "stage_seconds.tsv"), records)
    _write_experiment(os.path.join(results_dir, EXPERIMENT_FILE), planner, records)
    _write_command(os.path.join(results_dir, "command.txt"), invocation, commit,
                   [f"total wall seconds: {seconds} (stage_seconds.tsv: each run's; experiment.json: each command)"])
