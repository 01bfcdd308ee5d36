"""The tools an experiment step can run: the stages' entry points, and three small file steps.

A tool turns a resolved step (flags with every reference replaced) into a command line of its
entry point, run as a subprocess as a user would run it: stages talk only through files. Each
tool names the flag that receives the step's output folder and whether its output is worth
reusing: a merge or a plot takes seconds and reads files other steps may have added, so it
always runs. A tool whose entry point generates its flags from a config (training, evaluation,
the record types, the demo corpus) defines them here too (`Tool.define_flags`), so a step's
misspelt flag or wrongly typed value is refused when the experiment file loads.
"""

from __future__ import annotations

import collections.abc
import concurrent.futures
import dataclasses
import difflib
import functools
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Callable

from absl import flags as absl_flags

from dialoguecse_tf.cli.flag_utils import PrivateFlags, define_config_flags, define_corpus_flags
from dialoguecse_tf.io_utils import write_json
from dialoguecse_tf.records.registry import RECORD_TYPES


@dataclasses.dataclass(frozen=True)
class Tool:
    """How to run one kind of step."""

    script: str = ""  # entry point, relative to the repository; empty for in-process tools
    output_flag: str = "output_dir"  # receives the step's folder (output_file: a file in it)
    output_name: str = ""  # with output_flag output_file/export_dir: the name inside the folder
    cached: bool = True  # False: runs every time (merges and plots read what is there now)
    seeded: bool = False  # takes --random_seed from the step's seed
    needs_models: bool = False  # evaluates model rows: takes models, a suite and a part; its vary picks rows
    trains: bool = False  # trains an encoder: keeps a train log; with --rows, runs only for the rows asked
    # Runs in this process instead of a script: in_process(flags, inputs, output_dir).
    in_process: Callable | None = None
    input_flag: str = ""  # the flag each of the step's inputs is given as (merge, plots)
    writes_results: bool = False  # its output folder is the experiment's results folder
    resumes: bool = False  # goes on from the checkpoints a stopped attempt left in its folder
    # Part of every run's key, since keys hash settings and inputs, not code: bumped when the
    # tool writes other bytes for the same settings, so runs the former code made are not reused.
    version: int = 1
    # flags -> every setting the run takes, defaults included: part of the key, so a changed
    # default changes the key of every run that relied on it (and a committed result made before
    # it reads as stale). Empty: the flags alone (a tool whose defaults live in its flags only).
    settings: str = ""
    # Defines the entry point's flags, as the entry point generates them from its config, into a
    # FlagValues of its own (`define_flags(holder)`): a step's flags are checked against them when
    # the experiment loads. None: checked only by --dry_run (`check_flags`, the entry point's --helpxml).
    define_flags: Callable | None = None

    def effective_settings(self, flags: dict) -> dict | None:
        """The run's whole configuration for its key (flags as the step gives them, references
        still placeholders), or None for a tool keyed by its flags alone."""
        if not self.settings:
            return None
        return _SETTINGS[self.settings](flags)

    @property
    def needs_inputs(self) -> bool:
        return bool(self.input_flag)

    def check(self, step, where: str) -> None:
        if self.needs_models and not step.models:
            raise ValueError(f"{where}: tool {step.tool} needs models")
        if not self.needs_models and (step.models or step.suite):
            raise ValueError(f"{where}: only evaluate steps take models and suite")
        if self.needs_inputs and not step.inputs:
            raise ValueError(f"{where}: tool {step.tool} needs inputs")
        if step.part and not self.needs_models:
            raise ValueError(f"{where}: only evaluate steps write a part")
        if step.keep_train_log and not self.trains:
            raise ValueError(f"{where}: only train steps keep a train log")
        if step.seeds != "none" and not self.seeded:
            raise ValueError(f"{where}: tool {step.tool} takes no seed")
        self.check_flag_values(step.flags.as_dict(), where)
        if not self.needs_models:  # an evaluation's vary picks its models, it sets no flag
            for name, values in step.vary.as_dict().items():
                for value in values:
                    self.check_flag_values({name: value}, f"{where}: vary")

    def check_flag_values(self, flags: dict, where: str) -> None:
        """ValueError naming `where` and the flag when a flag is not one of the entry point's, or
        its value is not of the flag's type (integer, number, true/false, one of its choices).

        Args:
          flags: {flag name: value as the YAML gives it}; a value holding a reference (`{mlm}`) is
            checked once resolved, None leaves the flag out.
          where: the file and step, for the message.
        """
        if self.define_flags is None:
            return
        holder = PrivateFlags()
        self.define_flags(holder)
        known = holder.values
        for name, value in flags.items():
            if name not in known:
                hint = difflib.get_close_matches(name, sorted(known), n=1)
                raise ValueError(f"{where}: {self.script} has no flag --{name}"
                                 + (f"; did you mean --{hint[0]}?" if hint else ""))
            flag = known[name]
            if isinstance(value, list) and not isinstance(flag, absl_flags.MultiFlag):
                raise ValueError(f"{where}: flag --{name} takes one value, got {value!r}")
            for item in value if isinstance(value, list) else [value]:
                problem = _value_problem(flag, item)
                if problem:
                    raise ValueError(f"{where}: flag --{name} {problem}, got {item!r}")

    def command(self, flags: dict, inputs: list[str], output_dir: str) -> list[str]:
        argv = [sys.executable, self.script]
        for name, value in flags.items():
            argv.extend(flag_arguments(name, value))
        if self.input_flag:
            argv.extend(flag_arguments(self.input_flag, [match for item in inputs for match in expand_input(item)]))
        target = os.path.join(output_dir, self.output_name) if self.output_name else output_dir
        argv.append(f"--{self.output_flag}={target}")
        return argv


def expand_input(item: str) -> list[str]:
    """A step input as the files it names when the step runs: "PATH" or "LABEL=PATH".

    A glob in PATH (e.g. every part of a benchmark) expands there; the label is text (a row name
    such as "SiameseBERT_M [seed 12345]"), so its brackets are not a pattern. A pattern that
    matches nothing is an error, not a plot or merge that silently leaves its inputs out.
    """
    label, separator, path = item.rpartition("=")
    if not glob.has_magic(path):
        return [item]
    matches = sorted(glob.glob(path))
    if not matches:
        raise ValueError(f"input {item!r}: no file matches {path!r}")
    return [f"{label}{separator}{match}" for match in matches]


# A reference in a step's strings (`{mlm}`, `{params.NAME}`, `{seed}`), resolved by `plan.py`.
REFERENCE = re.compile(r"\{([A-Za-z0-9_.\-]+)\}")


# YAML types of the flags whose values are not text.
_KINDS = {absl_flags.BooleanParser: (bool, "true or false"), absl_flags.IntegerParser: (int, "an integer"),
          absl_flags.FloatParser: ((int, float), "a number")}


def _value_problem(flag, value) -> str | None:
    """Why `flag` refuses `value` (one YAML value), or None."""
    if value is None or (isinstance(value, str) and REFERENCE.search(value)):
        return None
    kind, wanted = _KINDS.get(type(flag.parser), (None, ""))
    if kind is not None and (not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)):
        return f"takes {wanted}"
    if isinstance(value, (dict, list)):
        return "takes one value"
    try:
        # The entry point's own parser: its choices and bounds.
        flag.parse(flag_arguments(flag.name, value)[0].partition("=")[2])
    except absl_flags.IllegalFlagValueError as error:
        return "refuses it: " + (str(error).partition(": ")[2] or str(error))
    return None


def flag_arguments(name: str, value) -> list[str]:
    """`--name=value`; a list repeats the flag, booleans are true/false, None leaves it out."""
    if value is None:
        return []
    if isinstance(value, list):
        return [argument for item in value for argument in flag_arguments(name, item)]
    if isinstance(value, bool):
        value = "true" if value else "false"
    return [f"--{name}={value}"]


def _training_settings(flags: dict) -> dict:
    """The objective, its options and the `TrainConfig` a training command resolves to: preset
    and objective defaults included (`config_fields.key_settings`)."""
    from dialoguecse_tf.cli.train_flags import stage_from_args
    from dialoguecse_tf.config_fields import key_settings
    from dialoguecse_tf.stage_config import REMOVED_SETTINGS, in_former_terms

    args = [argument for name, value in flags.items() for argument in flag_arguments(name, value)]
    objective, config = stage_from_args(args)
    # Removed settings too, at the value every run had, and a replaced one in its former terms
    # where it can say the value: the runs keyed before keep their keys.
    settings = {"objective": objective.name, **key_settings(objective.options), **in_former_terms(key_settings(config)),
                **REMOVED_SETTINGS}
    for where in ("output_dir", "overwrite_output_dir"):
        settings.pop(where)
    return settings


def _evaluation_settings(flags: dict) -> dict:
    """Every `EvaluationConfig` setting the step leaves at its default (models and suite are
    keyed on their own)."""
    from dialoguecse_tf.config_fields import key_settings
    from dialoguecse_tf.evaluation.config import EvaluationConfig

    per_run = {"checkpoint", "model_name", "output_dir", "eval_suite", "dialogue_protocol"}
    names = {spec.name for spec in dataclasses.fields(EvaluationConfig)} | {"seed"}
    for name in flags:
        if name not in names or name in per_run:
            raise absl_flags.UnrecognizedFlagError(name, suggestions=difflib.get_close_matches(name, sorted(names)))
    return key_settings(EvaluationConfig, {spec.name: flags.get(spec.name, spec.default)
                                           for spec in dataclasses.fields(EvaluationConfig) if spec.name not in per_run})


_SETTINGS = {"training": _training_settings, "evaluation": _evaluation_settings}


def _define_training_flags(holder) -> None:
    from dialoguecse_tf.cli.train_flags import define_training_flags

    define_training_flags(holder)


def _define_evaluation_flags(holder) -> None:
    from dialoguecse_tf.evaluation.config import EvaluationConfig

    define_config_flags(holder, EvaluationConfig)
    holder.DEFINE_alias("seed", "random_seed")


def _define_demo_corpus_flags(holder) -> None:
    from dialoguecse_tf.data.demo import DemoCorpusConfig

    define_config_flags(holder, DemoCorpusConfig)
    holder.DEFINE_alias("seed", "random_seed")


def _define_rs_sets_flags(holder) -> None:
    from dialoguecse_tf.prep import RsSetsConfig

    define_corpus_flags(holder)
    define_config_flags(holder, RsSetsConfig, exclude=("corpus",))


def _define_split_flags(holder) -> None:
    from dialoguecse_tf.data.splits import SplitConfig

    define_config_flags(holder, SplitConfig)


def _define_record_flags(name: str, holder) -> None:
    from dialoguecse_tf.cli.records_flags import define_records_flags

    define_records_flags(holder, RECORD_TYPES[name])


def write_bert_config(flags: dict, inputs: list[str], output_dir: str) -> None:
    """`bert_config`: the model file `template` with vocab_size counted from `vocab_file` (it
    takes no inputs).

    The small BERT's shape lives in one file; its vocabulary is built by an earlier step, so its
    size is known only then.
    """
    unknown = sorted(set(flags) - {"template", "vocab_file"})
    if unknown or "template" not in flags or "vocab_file" not in flags:
        raise ValueError(f"bert_config takes template and vocab_file, got {sorted(flags)}")
    with open(flags["template"], encoding="utf-8") as f:
        config = json.load(f)
    with open(flags["vocab_file"], encoding="utf-8") as f:
        config["vocab_size"] = sum(1 for _ in f)
    os.makedirs(output_dir, exist_ok=True)
    write_json(os.path.join(output_dir, "bert_config.json"), config)


def select_rows(flags: dict, inputs: list[str], output_dir: str) -> None:
    """`select_rows`: one results.json holding the rows `rows` of the input results, renamed.

    `rows` maps each wanted row's display name to the name it takes (e.g. a main run's
    "DialogueCSE_I2 [seed 12345]" -> "DialogueCSE_I2", a sweep's default point).
    """
    from dialoguecse_tf.evaluation.results_io import read_results
    from dialoguecse_tf.evaluation.tables import write_results

    unknown = sorted(set(flags) - {"rows"})
    if unknown or not isinstance(flags.get("rows"), dict) or len(inputs) != 1:
        raise ValueError("select_rows takes one input results.json and flags {rows: {row name: new name}}")
    results = read_results(inputs[0])
    by_name = {model["display_name"]: model for model in results["models"]}
    missing = sorted(set(flags["rows"]) - set(by_name))
    if missing:
        raise ValueError(f"{inputs[0]} has no row {missing}")
    results["models"] = [{**by_name[old], "display_name": new} for old, new in flags["rows"].items()]
    write_results(results, output_dir)


class _Tools(collections.abc.MutableMapping):
    """The tools by name: those given, and one per registered record type (`records.registry`:
    `RecordType.tool` running its entry point, keyed by its flags alone), read when asked, so
    that a record type is a tool once it is registered."""

    def __init__(self, tools: dict):
        self._tools = tools

    def _all(self) -> dict:
        records = {record_type.tool: Tool(record_type.entry_point, version=record_type.tool_version,
                                          define_flags=functools.partial(_define_record_flags, record_type.name))
                   for record_type in RECORD_TYPES.values()}
        return {**records, **self._tools}

    def __getitem__(self, name: str) -> Tool:
        return self._all()[name]

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __setitem__(self, name: str, tool: Tool) -> None:
        self._tools[name] = tool

    def __delitem__(self, name: str) -> None:
        del self._tools[name]


TOOLS = _Tools({
    "demo_corpus": Tool("data_prep/generate_demo_corpus.py", define_flags=_define_demo_corpus_flags),
    "vocab": Tool("data_prep/build_vocab.py"),
    "sr_set": Tool("data_prep/build_sr_set.py", output_flag="output_file", output_name="select.txt"),
    "split": Tool("data_prep/split_corpus.py", define_flags=_define_split_flags),
    "rs_sets": Tool("data_prep/build_rs_sets.py", define_flags=_define_rs_sets_flags),
    "bert_config": Tool(in_process=write_bert_config),
    "train": Tool("train/run_training.py", seeded=True, resumes=True, trains=True, settings="training",
                  define_flags=_define_training_flags),
    "evaluate": Tool("evaluation/run_evaluation.py", needs_models=True, settings="evaluation",
                     define_flags=_define_evaluation_flags),
    "export_savedmodel": Tool("export/export_savedmodel.py", output_flag="export_dir", output_name="savedmodel"),
    "export_encoder": Tool("export/export_encoder.py", output_name="model"),
    "select_rows": Tool(cached=False, input_flag="results", in_process=select_rows),
    "merge": Tool("evaluation/merge_results.py", cached=False, input_flag="results", writes_results=True),
    "plot_train_logs": Tool("evaluation/plot_train_logs.py", cached=False, input_flag="log", writes_results=True),
    "plot_sweep": Tool("evaluation/plot_sweep.py", cached=False, input_flag="point", writes_results=True),
    "findings": Tool("evaluation/write_findings.py", cached=False, input_flag="table", writes_results=True),
})


# Flags whose values are files or folders a step reads.
PATH_FLAGS = ("input_file", "train_file", "init_checkpoint", "vocab_file", "bert_config_file", "eval_dialogue_file",
              "eval_select_file", "eval_sts_file", "train_text_file", "template", "checkpoint", "claims")


@functools.lru_cache(maxsize=None)
def script_flags(script: str) -> frozenset:
    """The flags an entry point defines (`--helpxml`, without running it)."""
    # absl prints the list and exits with status 1.
    done = subprocess.run([sys.executable, script, "--helpxml"], capture_output=True, text=True)
    names = re.findall(r"<name>([^<]+)</name>", done.stdout)
    if not names:
        raise ValueError(f"{script} --helpxml gave no flag list: {done.stderr.strip().splitlines()[-1:]}")
    return frozenset(names)


def _flags_from_helpxml(tool: Tool) -> bool:
    """Whether `check_flags` asks the tool's entry point for its flags."""
    return bool(tool.script) and tool.define_flags is None


def ask_for_script_flags(runs) -> None:
    """Asks every entry point `check_flags` will read for its flags at once: each answer is a
    process start of seconds (TensorFlow's import), and seven of them in turn took 29 s."""
    scripts = sorted({run.tool.script for run in runs if _flags_from_helpxml(run.tool)})
    with concurrent.futures.ThreadPoolExecutor(max(1, len(scripts))) as pool:
        list(pool.map(script_flags, scripts))


def check_flags(run) -> None:
    """ValueError naming the step when a flag of `run` is not one its entry point defines (the
    tools with `Tool.define_flags` were checked when the experiment loaded)."""
    tool = run.tool
    if not _flags_from_helpxml(tool):
        return
    known = script_flags(tool.script)
    given = set(run.flags) | ({tool.input_flag} if tool.input_flag else set())
    for name in sorted(given - known):
        hint = difflib.get_close_matches(name, sorted(known), n=1)
        raise ValueError(f"step {run.step.name}: {tool.script} has no flag --{name}"
                         + (f"; did you mean --{hint[0]}?" if hint else ""))


def missing_inputs(run, produced: tuple) -> list[str]:
    """The files, folders or globs `run` reads that match nothing now, leaving out those under
    `produced` (folders the experiment's own steps write)."""
    paths = [run.flags.get(name) for name in PATH_FLAGS]
    paths += [item.rpartition("=")[2] for item in run.inputs] + [entry["file"] for entry in run.suite]
    paths += [checkpoint for _, checkpoint, _ in run.models]
    missing = []
    for value in paths:
        for path in (value if isinstance(value, list) else [value]):
            if not isinstance(path, str) or not path or any(
                    os.path.abspath(path).startswith(os.path.abspath(root) + os.sep) for root in produced):
                continue
            if not (glob.glob(path) if glob.has_magic(path) else os.path.exists(path)):
                missing.append(path)
    return missing


def remove_output(path: str) -> None:
    """Removes a run's folder; a folder linked from another experiment's run loses only its link."""
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
