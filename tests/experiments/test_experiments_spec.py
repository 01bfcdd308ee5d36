"""Experiment files as data (dialoguecse_tf/experiments/spec.py): steps that override an extended
or included step merge their flags into it, `like: STEP` starts a step from another, fragments
(`include`) bring shared params, suites and steps, a step names a suite; and a file written with
these plans exactly the runs and keys of the same steps written out in full."""

import os

import pytest

from conftest import REPO_ROOT
from dialoguecse_tf.experiments.plan import Planner
from dialoguecse_tf.experiments.spec import EXPERIMENTS_DIR, experiment_files, experiment_names, load_spec

DATA = os.path.relpath(REPO_ROOT.parent / "shared" / "data")
HEAD = "run_dir: r\nresults_dir: s\nseeds: [1, 2]\n"
BASE = HEAD + """steps:
  - name: dcse
    tool: train
    seeds: all
    keep_train_log: true
    flags: {preset: cpu_dse, train_file: x, init_checkpoint: y, learning_rate: 1.0e-4}
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def _steps(spec):
    return {step.name: step for step in spec.steps}


def test_an_override_of_an_extended_step_merges_its_flags_and_null_removes_one(tmp_path):
    base = _write(tmp_path, "base.yaml", BASE)
    path = _write(tmp_path, "child.yaml", f"extends: {base}\nsteps:\n"
                                          "  - {name: dcse, flags: {learning_rate: null, temperature: 0.2}}\n")
    step = _steps(load_spec(path))["dcse"]
    assert step.flags.as_dict() == {"preset": "cpu_dse", "train_file": "x", "init_checkpoint": "y", "temperature": 0.2}
    assert step.tool == "train" and step.seeds == "all"


def test_like_starts_from_a_step_with_its_flags_merged_but_not_its_results(tmp_path):
    path = _write(tmp_path, "tiny.yaml", HEAD + """steps:
  - name: a
    tool: train
    seeds: all
    results: {a.json: x.json}
    flags: {preset: cpu_dse, train_file: x, learning_rate: 1.0e-4}
  - {name: b, like: a, seeds: first, flags: {learning_rate: null, temperature: 0.2}}
  - {name: c, like: b, flags: {preset: cpu_simcse}}
""")
    steps = _steps(load_spec(path))
    assert steps["b"].flags.as_dict() == {"preset": "cpu_dse", "train_file": "x", "temperature": 0.2}
    assert (steps["b"].tool, steps["b"].seeds, steps["b"].results.as_dict(), steps["b"].like) == ("train", "first", {}, "")
    assert steps["c"].flags.as_dict() == {"preset": "cpu_simcse", "train_file": "x", "temperature": 0.2}
    assert steps["a"].results.as_dict() == {"a.json": "x.json"}


def test_like_an_extended_step_starts_from_it_as_its_experiment_declares_it(tmp_path):
    """Not as inherited (an inherited step keeps no train log in the new results folder)."""
    base = _write(tmp_path, "base.yaml", BASE)
    path = _write(tmp_path, "child.yaml", f"extends: {base}\nsteps:\n"
                                          "  - {name: ablation, like: dcse, seeds: first, flags: {temperature: 0.2}}\n")
    spec = load_spec(path)
    step = _steps(spec)["ablation"]
    assert step.keep_train_log and step.seeds == "first"
    assert step.flags.as_dict() == {"preset": "cpu_dse", "train_file": "x", "init_checkpoint": "y",
                                    "learning_rate": 1.0e-4, "temperature": 0.2}
    assert not _steps(spec)["dcse"].keep_train_log and list(spec.targets) == ["ablation"]


@pytest.mark.parametrize("steps,message", [
    ("  - {name: b, like: nowhere}\n", "step 'b' is like 'nowhere', which is no step; steps: a, b"),
    ("  - {name: b, like: c}\n  - {name: c, like: b}\n", "steps are like each other in a circle: b -> c -> b"),
])
def test_like_names_a_step_of_the_experiment(tmp_path, steps, message):
    path = _write(tmp_path, "tiny.yaml", HEAD + "steps:\n  - {name: a, tool: vocab, flags: {input_file: x}}\n" + steps)
    with pytest.raises(ValueError, match=f"^{path}: {message}"):
        load_spec(path)


FRAGMENT = """params: {size: 30}
suites:
  dev: [{dataset: D, task: sr, file: "{select}/select.txt"}]
  more: [{dataset: D, task: dsts, file: "{data}/sts.txt"}]
steps:
  - {name: vocab, tool: vocab, flags: {input_file: "{data}/c.jsonl", input_format: jsonl, vocab_size: "{params.size}"}}
  - {name: select, tool: sr_set, flags: {input_file: "{data}/c.jsonl", input_format: jsonl}}
  - {name: records, tool: pair_records, flags: {input_file: "{data}/c.jsonl", input_format: jsonl, vocab_file: "{vocab}/vocab.txt", min_words: 3}}
"""


def test_an_include_brings_params_suites_and_steps_renamed_chosen_and_overridden(tmp_path):
    _write(tmp_path, "common/frag.yaml", FRAGMENT)
    path = _write(tmp_path, "tiny.yaml", HEAD + """include:
  - {file: common/frag.yaml, prefix: zh_, steps: [vocab, records, select]}
params: {size: 40}
steps:
  - {name: first}
  - {name: zh_select, results: {sr.json: sr.json}}
  - {name: zh_records, flags: {min_words: null, pairing: self}}
  - {name: eval, tool: evaluate, models: [{name: M, checkpoint: m}], suite: [dev, {dataset: E, task: sr, file: e}, more]}
  - {name: first, tool: vocab, flags: {input_file: z}}
""".replace("  - {name: first}\n", ""))
    spec = load_spec(path)
    assert [step.name for step in spec.steps] == ["zh_vocab", "zh_select", "zh_records", "eval", "first"]
    steps = _steps(spec)
    assert steps["zh_records"].flags.as_dict() == {"input_file": "{data}/c.jsonl", "input_format": "jsonl",
                                                   "vocab_file": "{zh_vocab}/vocab.txt", "pairing": "self"}
    assert steps["zh_select"].results.as_dict() == {"sr.json": "sr.json"}
    assert [entry.as_dict() for entry in steps["eval"].suite] == [
        {"dataset": "D", "task": "sr", "file": "{zh_select}/select.txt"}, {"dataset": "E", "task": "sr", "file": "e"},
        {"dataset": "D", "task": "dsts", "file": "{data}/sts.txt"}]
    assert spec.params.as_dict() == {"size": 40}
    assert spec.targets == []


@pytest.mark.parametrize("text,message", [
    ("include: [common/nowhere.yaml]\nsteps: []\n", "fragment .*common/nowhere.yaml does not exist"),
    ("include: [{file: common/frag.yaml, steps: [vocab, vocabs]}]\n", "include common/frag.yaml: no step vocabs; "
                                                                       "its steps: vocab, select, records"),
    ("steps:\n  - {name: e, tool: evaluate, models: [{name: M, checkpoint: m}], suite: dve}\n",
     "step 'e' names suite 'dve', which the experiment does not declare; suites: none"),
    ("include: [common/bad.yaml]\n", r"common/bad.yaml: unknown key 'suites.dev\[0\].dataset_'"),
])
def test_a_bad_include_or_suite_name_is_refused_naming_the_file(tmp_path, text, message):
    _write(tmp_path, "common/frag.yaml", FRAGMENT)
    _write(tmp_path, "common/bad.yaml", "suites: {dev: [{dataset_: D}]}\n")
    path = _write(tmp_path, "tiny.yaml", HEAD + text)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_spec(path)


def test_a_file_with_includes_likes_and_suite_names_plans_the_keys_of_the_same_steps_in_full(tmp_path):
    _write(tmp_path, "common/frag.yaml", FRAGMENT)
    short = _write(tmp_path, "short.yaml", HEAD + """include: [{file: common/frag.yaml, prefix: p_}]
steps:
  - {name: p_records, flags: {min_words: null}}
  - {name: more_records, like: p_records, flags: {pairing: self}}
  - {name: eval, tool: evaluate, models: [{name: M, checkpoint: m}], suite: [dev, more], flags: {max_seq_length: 32}}
""")
    full = _write(tmp_path, "full.yaml", HEAD + """params: {size: 30}
steps:
  - {name: p_vocab, tool: vocab, flags: {input_file: "{data}/c.jsonl", input_format: jsonl, vocab_size: "{params.size}"}}
  - {name: p_select, tool: sr_set, flags: {input_file: "{data}/c.jsonl", input_format: jsonl}}
  - {name: p_records, tool: pair_records, flags: {input_file: "{data}/c.jsonl", input_format: jsonl, vocab_file: "{p_vocab}/vocab.txt"}}
  - {name: more_records, tool: pair_records, flags: {input_file: "{data}/c.jsonl", input_format: jsonl, vocab_file: "{p_vocab}/vocab.txt", pairing: self}}
  - name: eval
    tool: evaluate
    models: [{name: M, checkpoint: m}]
    suite: [{dataset: D, task: sr, file: "{p_select}/select.txt"}, {dataset: D, task: dsts, file: "{data}/sts.txt"}]
    flags: {max_seq_length: 32}
""")
    plans = [Planner(load_spec(path), run_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"),
                     data_dir=DATA, recorded_digests={}) for path in (short, full)]
    keys = [[(run.name, run.key, run.flags, run.suite) for run in plan.order] for plan in plans]
    assert keys[0] == keys[1] and len(keys[0]) == 5
    # A flag changed through the override changes the key: the comparison can fail.
    changed = Planner(load_spec(_write(tmp_path, "changed.yaml", open(short).read().replace("min_words: null", "min_words: 2"))),
                      run_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"), data_dir=DATA,
                      recorded_digests={})
    assert [run.key for run in changed.order] != [key for _, key, _, _ in keys[0]]


def test_fragments_are_not_experiments_and_every_experiment_file_loads():
    assert os.path.isdir(os.path.join(EXPERIMENTS_DIR, "common"))
    assert not any(name.startswith("common") for name in experiment_files())
    assert sorted(experiment_files()) == experiment_names()
    for name, path in experiment_files().items():
        assert load_spec(path).name == name
