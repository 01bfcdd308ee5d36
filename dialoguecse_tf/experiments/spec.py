"""Experiment specs: typed declarations of the runs behind a results folder.

An experiment is a YAML file under `experiments/` (or any path given to the runner). It names
its parameters, its seeds and a list of steps; each step is one stage tool (`tools.TOOLS`)
with its flags. The spec classes are Model Garden `hyperparams.Config` dataclasses, as
`official.core` experiment configs are: `override(..., is_strict=True)` applies the command
line's `--set name=value` to `params`, refusing names the experiment does not declare.
`hyperparams.Config` checks neither unknown keys nor types when it is built from a dict, so
`load_spec` checks both against the dataclass fields first, naming the file and the key.

A file may `include` fragments (YAML files of `params`, `suites` and `steps` that several
experiments share, e.g. `experiments/common/`; not experiments themselves), whose parts come
before the file's own; a step may name a `suite` of the experiment's `suites` instead of listing
it; a step may start from another step (`like: STEP`); and a step named as one of an included or
extended step changes the fields it gives, its `flags` merged into that step's (a flag set to
null is removed). `load_spec` folds all of these in: the spec it builds is the plain list of
steps the runner plans, so the same steps written out in full plan the same runs and keys.

Strings in `flags`, `models`, `suite` and `inputs` may hold references, resolved by `plan.py`:
`{STEP}` is the output folder of step STEP, `{params.NAME}` a parameter, `{seed}` the seed of
a seeded step, `{value}` the value of a step varied over one flag, and `{data}`, `{minilm}`,
`{run_dir}`, `{results_dir}`, `{repo}` the shared data folder, the installed
all-MiniLM-L6-v2, the experiment's two folders and the repository.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Any, Dict, List

import yaml
from official.core import registry
from official.modeling import hyperparams

from dialoguecse_tf.config_fields import type_hints
from dialoguecse_tf.evaluation.provenance import REPO_ROOT

EXPERIMENTS_DIR = os.path.join(REPO_ROOT, "experiments")
SEED_MODES = ("none", "all", "first")
MODEL_SEED_MODES = ("all", "first")


@dataclasses.dataclass
class ModelSpec(hyperparams.Config):
    """One row of an evaluation: a train step's encoder, or a fixed checkpoint."""

    name: str = ""  # display name; a seeded step's rows get " [seed S]"
    step: str = ""  # a train step; its `encoder` folder is evaluated
    encoder: str = "encoder"  # encoder or best_encoder
    checkpoint: str = ""  # a fixed checkpoint instead of a step (references allowed)
    protocol: str = ""  # the row's dialogue protocol (evaluation/dialogue_protocols.py)
    row: str = ""  # the row's id for `--rows` (default: the step's name, or the display name)


@dataclasses.dataclass
class SuiteEntrySpec(hyperparams.Config):
    """One evaluation: a dataset's column group, the registered task and its file."""

    dataset: str = ""
    task: str = ""
    file: str = ""


@dataclasses.dataclass
class StepSpec(hyperparams.Config):
    """One run of one tool. The step's output folder is `{run_dir}/{name}` (plus its seed/value)."""

    name: str = ""
    tool: str = ""
    flags: Dict[str, Any] = dataclasses.field(default_factory=dict)
    seeds: str = "none"  # none: one run; all: one per experiment seed; first: the first seed only
    like: str = ""  # a step this one starts from: its fields but name, results and part, flags merged
    vary: Dict[str, Any] = dataclasses.field(default_factory=dict)  # {flag: [values]}: one run per value
    models: List[ModelSpec] = dataclasses.field(default_factory=list)  # evaluate
    # evaluate: the rows of a seeded train step, all: one per seed; first: the first seed's only
    # (a task too costly for every seed, e.g. the fine-tuned ones on CPU).
    model_seeds: str = "all"
    suite: List[SuiteEntrySpec] = dataclasses.field(default_factory=list)  # evaluate
    part: str = ""  # evaluate: results also go to {results_dir}/parts/<part>[-<rows>]
    inputs: List[str] = dataclasses.field(default_factory=list)  # merge / plot / select_rows inputs
    keep_train_log: bool = False  # train: copy train_log.jsonl to {results_dir}/train_logs/
    results: Dict[str, Any] = dataclasses.field(default_factory=dict)  # {file in results_dir: file of the step}


@dataclasses.dataclass
class IncludeSpec(hyperparams.Config):
    """One fragment an experiment includes (in YAML, a bare path stands for {file: PATH})."""

    file: str = ""  # relative to the including file's folder
    prefix: str = ""  # put before the name of every step taken, and every reference to one
    steps: List[str] = dataclasses.field(default_factory=list)  # only these steps, in this order (default: all)


@dataclasses.dataclass
class FragmentSpec(hyperparams.Config):
    """A file of parts several experiments share: what an `include` merges in."""

    params: Dict[str, Any] = dataclasses.field(default_factory=dict)
    suites: Dict[str, Any] = dataclasses.field(default_factory=dict)  # {name: [suite entries]}
    steps: List[StepSpec] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ExperimentSpec(hyperparams.Config):
    """A named experiment: what `dialoguecse-experiment run NAME` plans and runs."""

    name: str = ""
    description: str = ""
    extends: str = ""  # another experiment whose params, seeds, suites and steps this one starts from
    include: List[IncludeSpec] = dataclasses.field(default_factory=list)  # fragments merged in first
    run_dir: str = ""
    results_dir: str = ""
    params: Dict[str, Any] = dataclasses.field(default_factory=dict)
    seeds: List[int] = dataclasses.field(default_factory=list)
    suites: Dict[str, Any] = dataclasses.field(default_factory=dict)  # {name: [suite entries]} steps name
    steps: List[StepSpec] = dataclasses.field(default_factory=list)
    targets: List[str] = dataclasses.field(default_factory=list)  # steps to run (default: this file's own)


_EXPERIMENTS: dict = {}


def experiment_files(directory: str = EXPERIMENTS_DIR) -> dict:
    """{name: path} of the experiments declared under `directory`."""
    if not os.path.isdir(directory):
        return {}
    return {os.path.splitext(name)[0]: os.path.join(directory, name)
            for name in sorted(os.listdir(directory)) if name.endswith(".yaml")}


def register_experiments(directory: str = EXPERIMENTS_DIR) -> None:
    """Registers every experiment file by name in the `official.core.registry` of experiments."""
    for name, path in experiment_files(directory).items():
        if name not in _EXPERIMENTS:
            registry.register(_EXPERIMENTS, name)(lambda path=path: load_spec(path))


def experiment_names() -> list[str]:
    register_experiments()
    return sorted(_EXPERIMENTS)


def get_experiment(name_or_path: str) -> ExperimentSpec:
    """A registered experiment by name, or the experiment file at a path."""
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
        return load_spec(name_or_path)
    register_experiments()
    if name_or_path not in _EXPERIMENTS:
        raise ValueError(f"unknown experiment {name_or_path!r}; experiments: {', '.join(sorted(_EXPERIMENTS))} "
                         f"(or give the path of an experiment file)")
    return registry.lookup(_EXPERIMENTS, name_or_path)()


def load_spec(path: str) -> ExperimentSpec:
    """Reads, checks and builds an experiment file, with its fragments and the experiment it extends folded in.

    Args:
      path: the experiment's YAML file.

    Returns:
      The experiment: its steps written out in full (fragments' steps first, then the file's own;
      a step overriding an included or extended one merged into it; `like` and suite names
      replaced by what they stand for), checked (`check_spec`, each tool's flags included).
    """
    data = _read_yaml(path, ExperimentSpec, "an experiment file")
    name = os.path.splitext(os.path.basename(path))[0]
    if data.get("name", name) != name:
        raise ValueError(f"{path}: name {data['name']!r} differs from the file's name {name!r}")
    data["name"] = name
    data = _with_fragments(data, path)
    base = get_experiment(data["extends"]).as_dict() if data.get("extends") else None
    if base:
        own = {step["name"]: step for step in data.get("steps", [])}
        for step in own.values():
            if step.get("like") and step["name"] in {s["name"] for s in base["steps"]}:
                raise ValueError(f"{path}: step {step['name']!r} overrides a step of {data['extends']}, "
                                 f"so it cannot be like another")
        # The base's results belong to its own results folder: its steps run here only as inputs.
        inherited = [{**step, "results": {}, "keep_train_log": False, "part": ""}
                     for step in base["steps"] if step["name"] not in own]
        # A step named as one of the base's changes the fields it gives, its flags merged in.
        replaced = [override_step(step, own[step["name"]]) for step in base["steps"] if step["name"] in own]
        added = [step for name, step in own.items() if name not in {s["name"] for s in base["steps"]}]
        data = {
            **base, **{key: value for key, value in data.items() if key not in ("params", "suites")},
            "params": {**base["params"], **data.get("params", {})},
            "suites": {**base["suites"], **data.get("suites", {})},
            "steps": inherited + replaced + added,
            "targets": data.get("targets") or [name for name in own],
        }
    # A step is like an extended one as that experiment declares it (not as inherited here).
    declared = {step["name"]: step for step in base["steps"] if step["name"] not in own} if base else {}
    data["steps"] = _resolve_like(data.get("steps", []), declared, path)
    data["steps"] = [_named_suites(step, data.get("suites", {}), path) for step in data["steps"]]
    spec = ExperimentSpec(**data)
    check_spec(spec, path)
    return spec


def override_step(step: dict, own: dict) -> dict:
    """`step` with the fields `own` gives, `own`'s flags merged into `step`'s.

    Args:
      step: a step as a dict (`StepSpec` fields).
      own: the fields that change; its `flags` set the flags they name (a new flag after
        `step`'s), and a flag set to None (YAML null) is removed.

    Returns:
      The new step as a dict.
    """
    flags = dict(step.get("flags", {}))
    for name, value in own.get("flags", {}).items():
        if value is None:
            flags.pop(name, None)
        else:
            flags[name] = value
    return {**step, **own, "flags": flags}


def _read_yaml(path: str, config_class, kind: str) -> dict:
    """The mapping a YAML file holds, its keys and types checked against `config_class`."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{kind} {path} does not exist")
    with open(path, encoding="utf-8") as f:
        try:
            data = yaml.safe_load(f)
        except yaml.YAMLError as error:
            # PyYAML's message spans lines; the one-line error keeps where and what.
            mark = getattr(error, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
            problem = " ".join(str(part) for part in (getattr(error, "context", None), getattr(error, "problem", None))
                               if part) or str(error).splitlines()[0]
            raise ValueError(f"{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: {kind} holds a mapping of {_field_names(config_class)}")
    # A bare path stands for {file: PATH}.
    data["include"] = [{"file": item} if isinstance(item, str) else item for item in data.get("include", [])]
    if config_class is FragmentSpec and data["include"]:
        raise ValueError(f"{path}: a fragment includes no other fragment")
    if config_class is FragmentSpec:
        del data["include"]
    _check_keys(data, config_class, path, "")
    return data


def _with_fragments(data: dict, path: str) -> dict:
    """`data` with the params, suites and steps of the fragments it includes merged in before its own.

    A step of the file named as an included one changes that step (`override_step`) and takes the
    file's place for it: the file orders its steps, the included ones it does not name first.
    """
    params, suites, steps = {}, {}, []
    for include in data.pop("include", []):
        fragment_path = os.path.join(os.path.dirname(os.path.abspath(path)), include["file"])
        fragment = _read_yaml(fragment_path, FragmentSpec, "fragment")
        where = f"{path}: include {include['file']}"
        by_name = {step.get("name"): step for step in fragment.get("steps", [])}
        wanted = include.get("steps") or list(by_name)
        unknown = [name for name in wanted if name not in by_name]
        if unknown:
            raise ValueError(f"{where}: no step {', '.join(unknown)}; its steps: {', '.join(by_name)}")
        rename = {name: include.get("prefix", "") + name for name in by_name}
        params.update(fragment.get("params", {}))
        suites.update({name: _renamed(entries, rename) for name, entries in fragment.get("suites", {}).items()})
        steps += [_renamed(by_name[name], rename) for name in wanted]
    own = [step.get("name") for step in data.get("steps", [])]
    included = {step["name"]: step for step in steps}
    merged = [step for step in steps if step["name"] not in own]
    merged += [override_step(included[step.get("name")], step) if step.get("name") in included else step
               for step in data.get("steps", [])]
    return {**data, "params": {**params, **data.get("params", {})}, "suites": {**suites, **data.get("suites", {})},
            "steps": merged}


def _renamed(value, rename: dict):
    """`value` (a fragment's step or suite) with its steps renamed: names, references, model steps."""
    from dialoguecse_tf.experiments.tools import REFERENCE

    if isinstance(value, str):
        return REFERENCE.sub(lambda match: "{" + rename.get(match.group(1), match.group(1)) + "}", value)
    if isinstance(value, list):
        return [_renamed(item, rename) for item in value]
    if isinstance(value, dict):
        return {key: rename.get(item, item) if key in ("name", "step", "like") and isinstance(item, str)
                else _renamed(item, rename) for key, item in value.items()}
    return value


def _resolve_like(steps: list, declared: dict, source: str) -> list:
    """The steps with each `like: STEP` folded in: STEP's fields but its name and the files it
    writes into the results folder (`results`, `part`), the step's own fields over them and its
    flags merged in (`override_step`). STEP is a step of this experiment (an extended
    experiment's as that experiment declares it: `declared`, {name: step})."""
    templates = {**{step.get("name"): step for step in steps}, **declared}
    resolved: dict = {}

    def resolve(step: dict, stack: tuple) -> dict:
        like = step.get("like")
        if not like:
            return step
        if like in stack:
            raise ValueError(f"{source}: steps are like each other in a circle: {' -> '.join(stack + (like,))}")
        if like not in templates:
            raise ValueError(f"{source}: step {step.get('name')!r} is like {like!r}, which is no step; "
                             f"steps: {', '.join(sorted(templates))}")
        if like not in resolved:
            resolved[like] = resolve(templates[like], stack + (like,))
        start = {key: value for key, value in resolved[like].items() if key not in ("name", "results", "part")}
        return {**override_step(start, step), "like": ""}

    return [resolve(step, (step.get("name"),)) for step in steps]


def _named_suites(step: dict, suites: dict, source: str) -> dict:
    """`step` with its suite written out: a suite name, or a list of entries and suite names."""
    suite = step.get("suite", [])
    items = [suite] if isinstance(suite, str) else suite
    entries = []
    for item in items:
        if isinstance(item, str):
            if item not in suites:
                raise ValueError(f"{source}: step {step.get('name')!r} names suite {item!r}, which the "
                                 f"experiment does not declare; suites: {', '.join(sorted(suites)) or 'none'}")
            entries.extend(suites[item])
        else:
            entries.append(item)
    return {**step, "suite": entries} if "suite" in step else step


def check_spec(spec: ExperimentSpec, source: str) -> None:
    """Refuses what the runner could only find out half-way: unknown tools, names, seeds."""
    from dialoguecse_tf.experiments.tools import TOOLS

    if not spec.run_dir or not spec.results_dir:
        raise ValueError(f"{source}: give run_dir and results_dir")
    names = [step.name for step in spec.steps]
    for i, step in enumerate(spec.steps):
        where = f"{source}: steps[{i}] ({step.name or 'unnamed'})"
        if not step.name or not step.name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise ValueError(f"{where}: a step needs a name of letters, digits, _, - and .")
        if names.count(step.name) > 1:
            raise ValueError(f"{where}: step name {step.name!r} is used twice")
        if step.tool not in TOOLS:
            raise ValueError(f"{where}: unknown tool {step.tool!r}; tools: {', '.join(sorted(TOOLS))}")
        if step.seeds not in SEED_MODES:
            raise ValueError(f"{where}: seeds must be one of {SEED_MODES}, got {step.seeds!r}")
        if step.seeds != "none" and not spec.seeds:
            raise ValueError(f"{where}: seeds {step.seeds!r} but the experiment declares no seeds")
        if step.model_seeds not in MODEL_SEED_MODES:
            raise ValueError(f"{where}: model_seeds must be one of {MODEL_SEED_MODES}, got {step.model_seeds!r}")
        vary = step.vary.as_dict()
        if len(vary) > 1 or any(not isinstance(values, list) or not values for values in vary.values()):
            raise ValueError(f"{where}: vary takes one flag and a non-empty list of its values")
        TOOLS[step.tool].check(step, where)
        for model in step.models:
            if bool(model.step) == bool(model.checkpoint):
                raise ValueError(f"{where}: model {model.name!r} needs exactly one of step and checkpoint")
            if model.step and model.step not in names:
                raise ValueError(f"{where}: model {model.name!r} names unknown step {model.step!r}")
    for index, target in enumerate(spec.targets):
        if target not in names:
            raise ValueError(f"{source}: target {target!r} is not a step")
        if target in spec.targets[:index]:
            raise ValueError(f"{source}: target {target!r} is listed twice")


def _field_names(config_class) -> str:
    return ", ".join(field.name for field in dataclasses.fields(config_class))


def _check_keys(data, config_class, source: str, where: str) -> None:
    """Unknown keys and wrong types against the dataclass fields, recursively."""
    hints = type_hints(config_class)
    fields = {field.name for field in dataclasses.fields(config_class)}
    for key, value in data.items():
        place = f"{where}.{key}" if where else key
        if key not in fields:
            raise ValueError(f"{source}: unknown key {place!r}; {config_class.__name__} takes {_field_names(config_class)}")
        if key == "suites":
            _check_type(value, Dict[str, Any], source, place)
            for name, entries in value.items():
                _check_type(entries, List[SuiteEntrySpec], source, f"{place}.{name}")
        elif key == "suite" and config_class is StepSpec:
            # Before `_named_suites` writes it out: a suite name, or a list of entries and names.
            for i, item in enumerate([value] if isinstance(value, str) else value if isinstance(value, list) else [value]):
                if not isinstance(item, str):
                    _check_type(item, SuiteEntrySpec, source, f"{place}[{i}]")
        else:
            _check_type(value, hints[key], source, place)


def _check_type(value, hint, source: str, place: str) -> None:
    origin = typing.get_origin(hint)
    if hint is Any:
        return
    if origin is typing.Union:
        if value is None:
            return
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        origin = typing.get_origin(hint)
    if origin in (list, List):
        if not isinstance(value, list):
            raise ValueError(f"{source}: {place} must be a list, got {value!r}")
        (item,) = typing.get_args(hint)
        for i, element in enumerate(value):
            _check_type(element, item, source, f"{place}[{i}]")
    elif origin in (dict, Dict):
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{source}: {place} must be a mapping with string keys, got {value!r}")
    elif dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ValueError(f"{source}: {place} must be a mapping of {_field_names(hint)}, got {value!r}")
        _check_keys(value, hint, source, place)
    elif hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{source}: {place} must be true or false, got {value!r}")
    elif hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{source}: {place} must be an integer, got {value!r}")
    elif hint is str:
        if not isinstance(value, str):
            raise ValueError(f"{source}: {place} must be a string, got {value!r}")


def apply_overrides(spec: ExperimentSpec, assignments: list[str]) -> ExperimentSpec:
    """Applies `NAME=VALUE` parameter overrides (VALUE read as YAML: 300, 1e-4, true, text)."""
    overrides = {}
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or not name:
            raise ValueError(f"--set takes NAME=VALUE, got {assignment!r}")
        overrides[name] = yaml.safe_load(text) if text else ""
    declared = spec.params.as_dict()
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise ValueError(f"experiment {spec.name} has no parameter {', '.join(unknown)}; "
                         f"its parameters: {', '.join(sorted(declared)) or 'none'}")
    spec.override({"params": overrides}, is_strict=True)
    return spec
