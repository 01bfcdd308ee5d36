"""`dialoguecse-experiment`: plans and runs a declared experiment.

  dialoguecse-experiment list
  dialoguecse-experiment run NAME [--dry_run] [--set NAME=VALUE ...] [--seeds=1,2] [--rows=a,b] [--only=step]
  dialoguecse-experiment docs [--check]
  dialoguecse-experiment compare BEFORE AFTER [--tolerance=X] [--output=FILE]

NAME is an experiment under experiments/ (or the path of an experiment file). `run` prints
the plan (every run with its key and whether it is reused), runs what is missing and writes
the results folder with the command, commit and timings; `--dry_run` prints the plan only.
Paths in an experiment are relative to the repository, where every run starts. `docs` rewrites
the tables of README.md, docs/ and benchmarks/README.md that copy a results file
(`dialoguecse_tf/experiments/doc_tables.py`); `--check` only names those that differ, and fails if any does,
or if a committed results folder is stale: its runs' keys, planned again from its recorded
command with the current code and data, differ from those it records, and results/SUPERSEDED.md
does not list it (`experiments/staleness.py`). `compare` checks that two runs of an experiment
(e.g. before and after a refactor, into two run and results folders) made the same numbers: every
metric, encoder weight and logged loss both hold (`experiments/compare.py`); it fails unless all
are within --tolerance (0: bit-identical).
"""

from __future__ import annotations

import os
import shlex
import sys

from absl import flags, logging

from dialoguecse_tf.cli.flag_utils import run as run_main

flags.DEFINE_bool("dry_run", False, "Print the plan (runs, keys, reused or not), check every step's flags against "
                  "its tool and that every input the experiment does not write exists, and run nothing.")
flags.DEFINE_multi_string("set", [], "NAME=VALUE: override one of the experiment's parameters; repeat.")
flags.DEFINE_list("seeds", None, "Seeds of the experiment's seeded steps, replacing its own.")
flags.DEFINE_list("rows", None, "Only these evaluation rows (and the runs they need); an evaluation then runs "
                  "in <run>-<row>+<row> and its part's results go to parts/<part>-<row>+<row> (rows in the "
                  "experiment's order), so each set of rows keeps its own.")
flags.DEFINE_list("only", None, "Only these steps (and the runs they need) instead of the experiment's targets, "
                  "run in the experiment's order.")
flags.DEFINE_string("run_dir", None, "Where runs go (default: the experiment's run_dir).")
flags.DEFINE_string("results_dir", None, "Where results go (default: the experiment's results_dir).")
flags.DEFINE_string("data_dir", None, "The shared data folder {data} refers to (default: ../shared/data beside "
                    "the repository).")
flags.DEFINE_list("reuse_under", ["runs"], "Folders searched for a finished run of the same key (another "
                  "experiment's), linked instead of run again; empty: only the experiment's own runs.")
flags.DEFINE_bool("check", False, "With docs: change nothing, fail naming every generated table that differs "
                  "from its results file and every results folder the current code would make differently "
                  "that results/SUPERSEDED.md does not list.")
flags.DEFINE_float("tolerance", 0.0, "With compare: the largest absolute difference of a metric, weight or loss "
                   "that still passes (0: only bit-identical runs pass).")
flags.DEFINE_string("output", None, "With compare: also write the report as JSON to this file.")
FLAGS = flags.FLAGS

USAGE = ("usage: dialoguecse-experiment list | run NAME [flags] | docs [--check] | compare BEFORE AFTER "
         "(--helpshort lists the flags)")


def main(argv):
    from dialoguecse_tf.evaluation.provenance import REPO_ROOT

    args = argv[1:]
    if args == ["docs"]:
        _docs(REPO_ROOT, FLAGS.check, FLAGS.data_dir)
        return
    if len(args) == 3 and args[0] == "compare":
        _compare(args[1], args[2], FLAGS.tolerance, FLAGS.output)
        return
    from dialoguecse_tf.experiments.execute import check_plan, describe_plan, portable_argument, run_experiment
    from dialoguecse_tf.experiments.plan import Planner
    from dialoguecse_tf.experiments.spec import apply_overrides, experiment_names, get_experiment

    logging.set_verbosity(logging.INFO)
    if args == ["list"]:
        for name in experiment_names():
            print(f"{name}: {get_experiment(name).description.strip().splitlines()[0]}")
        return
    if len(args) != 2 or args[0] != "run":
        raise ValueError(USAGE)
    given = {name: os.path.abspath(getattr(FLAGS, name)) for name in ("run_dir", "results_dir", "data_dir")
             if getattr(FLAGS, name)}
    target = os.path.abspath(args[1]) if args[1].endswith((".yaml", ".yml")) else args[1]
    os.chdir(REPO_ROOT)
    spec = apply_overrides(get_experiment(target), FLAGS.set)
    if FLAGS.seeds:
        spec.seeds = [int(seed) for seed in FLAGS.seeds]
    relative = lambda path: os.path.relpath(path, REPO_ROOT)  # noqa: E731
    planner = Planner(
        spec,
        run_dir=relative(given["run_dir"]) if "run_dir" in given else spec.run_dir,
        results_dir=relative(given["results_dir"]) if "results_dir" in given else spec.results_dir,
        data_dir=relative(given.get("data_dir", os.path.join(REPO_ROOT, "..", "shared", "data"))),
        rows=FLAGS.rows, only=FLAGS.only, reuse_under=tuple(FLAGS.reuse_under),
    )
    print(describe_plan(planner), flush=True)
    check_plan(planner)
    if FLAGS.dry_run:
        return
    invocation = shlex.join(["dialoguecse-experiment"] + [portable_argument(arg) for arg in sys.argv[1:]])
    run_experiment(planner, invocation)


def _docs(repo_root: str, check: bool, data_dir: str | None) -> None:
    from dialoguecse_tf.experiments.doc_tables import update_docs
    from dialoguecse_tf.experiments.staleness import STALE_SECTION, SUPERSEDED_FILE, check_results, listed_but_current

    stale = update_docs(repo_root, check=check)
    if check and stale:
        raise ValueError(f"{len(stale)} generated tables differ from their results files: "
                         f"{'; '.join(block.name for block in stale)} (dialoguecse-experiment docs rewrites them)")
    for block in stale:
        print(f"rewrote {block.name}")
    if not stale:
        print("every generated table matches its results file")
    unlisted, listed = check_results(repo_root, os.path.abspath(data_dir) if data_dir else None)
    for folder in listed:
        print(f"kept from before a change ({SUPERSEDED_FILE}): {folder.describe()}")
    current = listed_but_current(repo_root, listed)
    if current:
        message = (f"{SUPERSEDED_FILE} lists {', '.join(current)} under {STALE_SECTION!r}, but the current code "
                   "makes them (rerun since, or gone): take them off the list")
        if check:
            raise ValueError(message)
        print(message)
    if unlisted:
        message = (f"{len(unlisted)} results folders are stale (the current code would make them differently) and "
                   f"{SUPERSEDED_FILE} does not list them under {STALE_SECTION!r}: "
                   + "; ".join(folder.describe() for folder in unlisted))
        if check:
            raise ValueError(message)
        print(message)
    else:
        print("every results folder is what the current code makes, or listed as made before a change")


def _compare(before: str, after: str, tolerance: float, output: str | None) -> None:
    from dialoguecse_tf.experiments.compare import compare_folders
    from dialoguecse_tf.io_utils import write_json

    report = compare_folders(before, after, tolerance)
    if output:
        write_json(output, report)
    for kind in ("results", "checkpoints", "train_logs"):
        for path, counts in report[kind].items():
            print(f"{kind} {path}: {counts['values']} values, {counts['differing']} differ, "
                  f"largest difference {counts['max_abs_diff']:.3g}")
    if report.get("unmatched"):
        print(f"only in one folder: {', '.join(report['unmatched'])}")
    if not report["within_tolerance"]:
        raise ValueError(f"{before} and {after} differ beyond {tolerance:g} (or hold different files)")
    print("identical" if report["identical"] else f"equal within {tolerance:g}")


def run():
    run_main(main)


if __name__ == "__main__":
    run()
