"""Committed results the current code would make differently.

Every results folder the runner writes (and every evaluation part in it) holds
`experiment.json`, with each run's key and the inputs it read outside the data folder, and
`command.txt`, with the command that made it. A
run's key hashes its tool and the tool's version, its settings with every default, its models,
suite and inputs (`plan.py`), so planning the same command again with the current code and data
gives the same keys exactly when the same runs would come out. `stale_folders` does that for
every folder under `results/` and names those whose keys differ, unless `results/SUPERSEDED.md`
lists the folder in its section `STALE_SECTION`: results kept, knowingly, from before a change.
A folder whose runs read a stale folder's results (a table merged from evaluation parts, rows
selected from another experiment's table) is stale with it.

The plan needs no run folder: an input that was another experiment's run is read from the
digest the folder recorded (`external_digests`). Folders without `experiment.json` (records of
a check of their time, e.g. `results/runner_check/`) are not experiment outputs and are skipped.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shlex

from dialoguecse_tf.experiments.execute import EXPERIMENT_FILE

SUPERSEDED_FILE = os.path.join("results", "SUPERSEDED.md")
STALE_SECTION = "## Results made before a change of the code"
# The runner's flags a recorded command may carry (cli/experiment.py).
_RUN_FLAGS = ("set", "seeds", "rows", "only", "run_dir", "results_dir", "data_dir", "reuse_under")


@dataclasses.dataclass
class FolderCheck:
    """One results folder against the current code."""

    folder: str  # relative to the repository
    changed: list  # names of recorded runs whose key differs (or that the plan no longer has)
    error: str = ""  # why the folder's runs could not be planned again
    reads: list = dataclasses.field(default_factory=list)  # stale folders whose results its runs read
    inputs: list = dataclasses.field(default_factory=list)  # the recorded inputs outside the data folder

    @property
    def stale(self) -> bool:
        return bool(self.changed or self.error or self.reads)

    def describe(self) -> str:
        if self.error:
            return f"{self.folder} ({self.error})"
        if not self.changed:
            return f"{self.folder} (reads the stale {', '.join(self.reads)})"
        shown = ", ".join(self.changed[:4]) + (f" and {len(self.changed) - 4} more" if len(self.changed) > 4 else "")
        return f"{self.folder} (runs whose key changed: {shown})"


def recorded_command(folder: str) -> dict:
    """The runner flags of the command in `folder`/command.txt: {flag: [values]}, and `name`."""
    with open(os.path.join(folder, "command.txt"), encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line and not line.startswith("#")]
    if not lines:
        raise ValueError(f"{folder}/command.txt names no command")
    words = shlex.split(lines[0])
    if len(words) < 3 or words[1] != "run":
        raise ValueError(f"{folder}/command.txt: not a `dialoguecse-experiment run` command: {lines[0]}")
    parsed: dict = {"name": words[2]}
    rest = iter(words[3:])
    for word in rest:
        name, sep, value = word.lstrip("-").partition("=")
        if name not in _RUN_FLAGS:
            continue
        if not sep:
            value = next(rest, "")
        parsed.setdefault(name, []).append(value)
    return parsed


def _as_list(values) -> list[str] | None:
    if not values:
        return None
    items = [item for value in values for item in value.split(",") if item]
    return items or None


def current_keys(folder: str, record: dict, data_dir: str) -> dict:
    """{run name: key} of the folder's command planned again with the current code and data."""
    from dialoguecse_tf.experiments.plan import Planner
    from dialoguecse_tf.experiments.spec import apply_overrides, get_experiment

    command = recorded_command(folder)
    spec = apply_overrides(get_experiment(command["name"]), command.get("set", []))
    seeds = _as_list(command.get("seeds"))
    if seeds:
        spec.seeds = [int(seed) for seed in seeds]
    # The folder itself is the results folder its runs read (a part's is the folder above parts/).
    results_dir = os.path.dirname(os.path.dirname(folder)) if os.path.basename(
        os.path.dirname(folder)) == "parts" else folder
    run_dir = (command.get("run_dir") or [record.get("run_dir") or spec.run_dir])[-1]
    planner = Planner(spec, run_dir=run_dir, results_dir=results_dir, data_dir=data_dir,
                      rows=_as_list(command.get("rows")), only=_as_list(command.get("only")),
                      recorded_digests=record.get("external_digests", {}))
    return {run.name: run.key for run in planner.order}


def check_folder(folder: str, data_dir: str) -> FolderCheck:
    with open(os.path.join(folder, EXPERIMENT_FILE), encoding="utf-8") as f:
        record = json.load(f)
    try:
        keys = current_keys(folder, record, data_dir)
    except (ValueError, OSError, KeyError) as error:
        return FolderCheck(folder, [], f"cannot be planned again: {error}")
    changed = [run["run"] for run in record["runs"] if keys.get(run["run"]) != run["key"]]
    return FolderCheck(folder, changed, inputs=sorted(record.get("external_digests", {})))


def _input_files(pattern: str) -> list[str]:
    """The files a recorded input names now, or the part of its pattern before any wildcard."""
    matches = glob.glob(pattern)
    return [os.path.normpath(match) for match in matches] or [os.path.normpath(re.split(r"[*?\[]", pattern)[0])]


def _mark_readers(checks: list[FolderCheck]) -> None:
    """A folder whose runs read another folder's results (a table merged from parts, rows
    selected from a main run) is stale when that folder is, transitively."""
    changed = True
    while changed:
        changed = False
        stale = [check.folder for check in checks if check.stale]
        for check in checks:
            reads = {folder for pattern in check.inputs for path in _input_files(pattern) for folder in stale
                     if folder != check.folder and (path + os.sep).startswith(folder + os.sep)}
            if not reads <= set(check.reads):
                check.reads = sorted(reads | set(check.reads))
                changed = True


def listed_stale(repo_root: str) -> set[str]:
    """The folders `SUPERSEDED_FILE` keeps knowingly: the `results/` paths in the first column of
    its `STALE_SECTION` table (a file named beside them, e.g. `stage_seconds.tsv`, is not a folder)."""
    path = os.path.join(repo_root, SUPERSEDED_FILE)
    if not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.find(STALE_SECTION + "\n")
    if start < 0:
        return set()
    section = text[start + len(STALE_SECTION):]
    section = section[:section.find("\n## ")] if "\n## " in section else section
    folders = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            for path_text in re.findall(r"`(results/[^`]*)`", line.split("|")[1]):
                folders.add(os.path.normpath(path_text))
    return folders


def listed_but_current(repo_root: str, listed: list[FolderCheck]) -> list[str]:
    """The folders `SUPERSEDED_FILE` keeps as made before a change that hold no stale folder any
    more (rerun since, or removed): a listing that outlives its rerun tells the docs' readers the
    numbers predate a change they do not.

    Args:
      repo_root: the repository.
      listed: the listed stale folders, `check_results`'s second list.

    Returns:
      the listed paths, sorted.
    """
    return sorted(kept for kept in listed_stale(repo_root) if not any(_within(check.folder, kept) for check in listed))


def _within(folder: str, kept: str) -> bool:
    """Whether `folder` is the listed folder `kept` or lies in it (a listing covers its folders)."""
    return folder == kept or folder.startswith(kept + os.sep)


def check_results(repo_root: str, data_dir: str | None = None) -> tuple[list[FolderCheck], list[FolderCheck]]:
    """(stale, listed): every results folder (or part) whose runs the current code would make
    differently, split into those `SUPERSEDED_FILE` does not list and those it does. Paths are
    relative to `repo_root`, where planning runs (as the runner runs)."""
    data_dir = data_dir or os.path.join("..", "shared", "data")
    listed = listed_stale(repo_root)
    previous = os.getcwd()
    os.chdir(repo_root)
    try:
        folders = sorted(os.path.dirname(path) for path in glob.glob(
            os.path.join("results", "**", EXPERIMENT_FILE), recursive=True))
        checks = [check_folder(folder, data_dir) for folder in folders]
        _mark_readers(checks)
        checks = [check for check in checks if check.stale]
    finally:
        os.chdir(previous)

    def is_listed(folder: str) -> bool:
        return any(_within(folder, kept) for kept in listed)

    return ([check for check in checks if not is_listed(check.folder)],
            [check for check in checks if is_listed(check.folder)])
