"""dialoguecse_tf/experiments and the dialoguecse-experiment runner: every declared experiment
plans, its training runs parse into valid configurations (the paper-sized ones, which no CPU
machine runs, into the papers' settings), bad specs are refused naming the file and key, and
keys decide what runs, what is reused and what is linked from another experiment's runs."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from dialoguecse_tf.cli.train_flags import stage_from_args
from dialoguecse_tf.data.dialogue_acts import scored_split
from dialoguecse_tf.experiments import execute
from dialoguecse_tf.experiments.execute import (check_plan, command_line, declared_train_logs, describe_plan,
                                                portable_argument, run_experiment)
from dialoguecse_tf.experiments.plan import STEP_FILE, Planner
from dialoguecse_tf.experiments.spec import apply_overrides, experiment_names, get_experiment, load_spec
from dialoguecse_tf.experiments.tools import TOOLS, Tool, expand_input

DATA = os.path.relpath(REPO_ROOT.parent / "shared" / "data")
# Parameters a CPU machine cannot fill: a Chinese BERT (any folder stands in; nothing is read).
NEEDED = {"benchmark_paper": ["zh_init_checkpoint=/tmp/chinese_bert"], "ecd_paper": ["init_checkpoint=/tmp/chinese_bert"]}
# Encoders other experiments train, standing in for the English dial2vec comparison's rows.
STAND_INS = {"dial2vec_sgd_minilm": ['dialoguecse_encoder="{minilm}"', 'dse_encoder="{minilm}"']}


def _planner(name, tmp_path, **kwargs):
    spec = apply_overrides(get_experiment(name), NEEDED.get(name, []) + STAND_INS.get(name, []))
    return Planner(spec, run_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"), data_dir=DATA,
                   **kwargs)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("plans")
    return {name: _planner(name, tmp_path) for name in experiment_names()}


def test_every_committed_experiment_is_declared(plans):
    assert {"demo", "ecd_cpu", "ecd_sweeps", "ecd_study", "ecd_study_empty_rounds", "sgd_minilm", "sgd_study",
            "sgd_study_empty_rounds", "dse_sgd_minilm", "dial2vec_sgd_minilm", "benchmark",
            "benchmark_paper", "ecd_paper", "ecd_budget"} <= set(plans)
    for name, planner in plans.items():
        assert planner.order, name
        assert f"experiment {name}:" in describe_plan(planner)
        if name not in NEEDED:  # a stand-in Chinese BERT folder that does not exist
            check_plan(planner)


def test_every_training_run_parses_into_a_valid_configuration(plans):
    for name, planner in plans.items():
        for run in planner.order:
            if run.step.tool == "train":
                arguments = command_line(run)[2:]
                objective, config = stage_from_args(arguments)
                assert config.output_dir == run.output_dir, (name, run.name)
                if run.seed is not None:
                    assert config.random_seed == run.seed


def _evaluated_rows(planner):
    """(experiment evaluate run, display name without seed, train run or None, protocol) per row."""
    trains = {run.output_dir: run for run in planner.order if run.step.tool == "train"}
    for run in planner.order:
        if run.step.tool != "evaluate":
            continue
        for name, checkpoint, protocol in run.models:
            yield run, name.split(" [seed ")[0], trains.get(os.path.dirname(checkpoint)), protocol


def test_every_row_is_trained_and_read_as_its_release_does(plans):
    """DSE-dropout with the DSE release's default loss (HardNeg, pretrain/main.py:76); SimCSE's
    dialogue columns by the mean over "[CLS] u" without [SEP] (dial2vec's run_simcse.sh); every
    dialogue column at the 512 tokens of dial2vec's release (data_provider.py:105)."""
    seen = set()
    for name, planner in plans.items():
        for evaluation, row, train, protocol in _evaluated_rows(planner):
            if row.startswith("DSE-dropout") and train is not None:
                objective, _ = stage_from_args(command_line(train)[2:])
                assert objective.options.contrast_type == "HardNeg", (name, train.name)
                seen.add("dse_dropout")
            if row == "SimCSE" and protocol:
                assert protocol == "utterance_token_mean", (name, evaluation.name)
                seen.add("simcse")
            if any(entry["task"] in ("clustering", "relatedness", "dialogue_retrieval") for entry in evaluation.suite):
                assert evaluation.flags.get("dialogue_max_seq_length", 512) == 512, (name, evaluation.name)
                seen.add("dialogue")
    assert seen == {"dse_dropout", "simcse", "dialogue"}


def _files(paths) -> set:
    """The data files a list of paths, folders and globs names."""
    import glob as globbing

    found = set()
    for path in paths:
        for match in globbing.glob(path) or [path]:
            found.update(os.path.join(root, name) for root, _, names in os.walk(match) for name in names)
            if os.path.isfile(match):
                found.add(os.path.normpath(match))
    return {os.path.normpath(path) for path in found}


def test_a_row_that_selects_its_checkpoint_selects_apart_from_what_it_is_scored_and_trained_on(plans):
    """A selected encoder (best_encoder) was picked on files that neither the table scoring it
    nor its training records read."""
    selecting = 0
    for name, planner in plans.items():
        by_name = {run.name: run for run in planner.order}
        for evaluation, row, train, _ in _evaluated_rows(planner):
            if train is None or not any(checkpoint.endswith("best_encoder") and os.path.dirname(checkpoint) ==
                                        train.output_dir for _, checkpoint, _ in evaluation.models):
                continue
            _, config = stage_from_args(command_line(train)[2:])

            def sources(paths):
                """Data files behind paths; a file an earlier step writes (an SR set) is its input's, but
                a split's file is its own: the split's files are disjoint parts of its input
                (tests/data/test_splits.py)."""
                found = set()
                for path in paths:
                    maker = next((run for run in planner.order if path.startswith(run.output_dir + os.sep)), None)
                    if maker is None:
                        found |= _files([path])
                    elif maker.step.tool == "split":
                        found.add(os.path.normpath(path))
                    else:
                        inputs = maker.flags.get("input_file")
                        found |= sources(inputs if isinstance(inputs, list) else [inputs])
                return found

            picked = sources([entry.file for entry in config.eval_entries()])
            # A fine-tuned task trains copies on a pool it also reads; what its numbers score is
            # the split its data module names.
            scored = sources([scored_split(entry["file"]) if entry["task"] == "dialogue_act" else entry["file"]
                              for entry in evaluation.suite])
            corpus = sources([path for upstream in train.needs if by_name[upstream].step.tool.endswith("records")
                              for path in [by_name[upstream].output_dir + os.sep + "x"]])
            assert config.eval_steps > 0 and picked, (name, train.name)
            assert not picked & scored, (name, train.name, sorted(picked & scored)[:3])
            assert not picked & corpus, (name, train.name, sorted(picked & corpus)[:3])
            selecting += 1
    assert selecting >= 12  # the benchmark's English DialogueCSE, SiameseBERT_M, SimCSE and dial2vec rows


def test_the_budget_study_trains_each_row_at_every_budget_and_seed_from_one_encoder(plans):
    planner = plans["ecd_budget"]
    trained = {}
    for run in planner.order:
        if run.step.tool == "train" and run.step.name.startswith("budget_"):
            objective, config = stage_from_args(command_line(run)[2:])
            trained[(run.step.name, run.seed, run.value)] = (objective, config)
    assert len(trained) == 3 * 3 * 3
    for (step, seed, steps), (objective, config) in trained.items():
        assert config.resolved(objective).num_train_steps == steps and config.random_seed == seed
        assert config.init_checkpoint.endswith(os.path.join("mlm", "encoder"))
        expected = {"budget_siamese_m": "siamese_m"}.get(step, "dialoguecse")
        assert objective.name == expected, step
        if expected == "dialoguecse":
            assert objective.options.variant == "released"
            assert objective.options.matching_side == ("response" if step == "budget_response_side" else "context")


# The objective and settings each paper-sized benchmark row reaches, as the papers give them;
# MiniLM (English track) has 6 layers, so the papers' 6 frozen layers of 12 become 3.
_PAPER_ROWS = {
    "mlm": ("mlm", {}),
    "dialoguecse_i2": ("dialoguecse", {"temperature": 0.1, "num_negatives": 9, "aggregation": "mean"}),
    "dialoguecse": ("dialoguecse", {"variant": "released", "temperature": 0.1, "num_negatives": 9,
                                    "aggregation": "attention"}),
    "simcse": ("simcse", {"temperature": 0.05, "pooler": "cls", "mlp_only_train": True}),
    "siamese_m": ("siamese_m", {"num_negatives": 9}),
    "dse": ("dse", {"temperature": 0.05, "contrast_type": "HardNeg"}),
    "dse_dropout": ("dse", {"temperature": 0.05, "contrast_type": "HardNeg"}),
    "dial2vec": ("dial2vec", {"temperature": 0.2, "window": 10}),
}


def test_the_paper_benchmark_rows_parse_into_the_papers_settings(plans):
    seen = set()
    for run in plans["benchmark_paper"].order:
        if run.step.tool != "train":
            continue
        track, _, row = run.step.name.partition("_")
        objective, config = stage_from_args(command_line(run)[2:])
        expected_objective, options = _PAPER_ROWS[row]
        assert objective.name == expected_objective, run.name
        for option, value in options.items():
            assert getattr(objective.options, option) == value, (run.name, option)
        if row in ("dialoguecse", "dialoguecse_i2", "siamese_m", "dial2vec"):
            assert objective.options.num_frozen_layers == (6 if track == "zh" else 3), run.name
        if row.startswith("dse"):
            assert config.resolved(objective).train_batch_size == 1024
        seen.add(run.step.name)
    assert len(seen) == 16


def test_a_required_parameter_is_asked_for(tmp_path):
    with pytest.raises(ValueError, match="needs parameter zh_init_checkpoint: give --set zh_init_checkpoint="):
        Planner(get_experiment("benchmark_paper"), str(tmp_path), str(tmp_path), DATA)


def test_rows_and_only_pick_one_benchmark_part(tmp_path):
    planner = _planner("benchmark", tmp_path, rows=["dial2vec"], only=["zh_eval"])
    names = [run.name for run in planner.order]
    assert names[-1] == "zh_eval" and "zh_dial2vec_seed34567" in names
    assert not any("dse" in name or "siamese" in name or name.startswith("en_") for name in names)
    assert [model[0] for model in planner.order[-1].models] == [f"dial2vec [seed {s}]" for s in (12345, 23456, 34567)]
    with pytest.raises(ValueError, match="unknown rows"):
        _planner("benchmark", tmp_path, rows=["dialogue_cse"])
    with pytest.raises(ValueError, match="unknown step"):
        _planner("benchmark", tmp_path, only=["zh_evaluation"])
    # Asked table first, the study evaluates first: its table (a step it takes over from sgd_minilm)
    # merges the part the evaluation writes.
    names = [run.name for run in _planner("sgd_study", tmp_path, only=["table", "eval_study"]).order]
    assert names[-2:] == ["eval_study", "table"]
    # A step outside an experiment's declared targets keeps its place: sgd_mlm_start's curves plot
    # the log of the MLM run asked with them.
    names = [run.name for run in _planner("sgd_mlm_start", tmp_path, only=["train_curves", "en_mlm"]).order]
    assert names.index("en_mlm") < names.index("train_curves")


def test_the_benchmark_starts_each_track_where_its_docs_say(tmp_path):
    """English: every trained row from MiniLM itself (the start results/sgd_mlm_start chose,
    docs/english_track.md); Chinese: DialogueCSE and SiameseBERT_M from the MLM encoder, as the
    DialogueCSE paper does."""
    from dialoguecse_tf.experiments.plan import minilm_dir

    planner = _planner("benchmark", tmp_path)
    starts = {run.name: run.flags.get("init_checkpoint") for run in planner.order if run.step.tool == "train"}
    mlm = {track: next(run.output_dir for run in planner.order if run.name == f"{track}_mlm") for track in ("zh", "en")}
    english = {name: start for name, start in starts.items() if name.startswith("en_") and name != "en_mlm"}
    assert len(english) == 21 and set(english.values()) == {minilm_dir()}
    chinese = {name: start for name, start in starts.items() if name.startswith(("zh_siamese_m", "zh_dialoguecse"))}
    assert len(chinese) == 9 and set(chinese.values()) == {os.path.join(mlm["zh"], "encoder")}


def test_the_fine_tuned_evaluations_score_the_first_seed_of_each_row(tmp_path):
    """model_seeds: first keeps one row per seeded train step, its first seed's; the other
    evaluations keep every seed."""
    planner = _planner("benchmark", tmp_path, only=["en_eval", "en_eval_ft"])
    evaluations = {run.name: run for run in planner.order if run.name in ("en_eval", "en_eval_ft")}
    every = [name for name, _, _ in evaluations["en_eval"].models]
    first = [name for name, _, _ in evaluations["en_eval_ft"].models]
    assert len(every) == 23 and len(first) == 9
    assert first == [name for name in every if "[seed" not in name or name.endswith("[seed 12345]")]


def test_an_evaluation_of_some_rows_has_a_folder_of_its_own(tmp_path):
    """Evaluating other rows later (a benchmark split into parts) leaves a finished part's run as
    it is, so it is reused, as its results' parts/ folder is kept; the rows are named in the
    order the experiment declares them, whatever order --rows gives."""
    whole = _planner("benchmark", tmp_path, only=["zh_eval"]).order[-1]
    some = _planner("benchmark", tmp_path, rows=["dial2vec"], only=["zh_eval"]).order[-1]
    others = _planner("benchmark", tmp_path, rows=["dse", "simcse"], only=["zh_eval"]).order[-1]
    assert whole.output_dir == os.path.join(str(tmp_path), "runs", "zh_eval")
    assert some.output_dir == whole.output_dir + "-dial2vec"
    assert others.output_dir == whole.output_dir + "-simcse+dse"
    assert _planner("benchmark", tmp_path, rows=["simcse", "dse"], only=["zh_eval"]).order[-1].output_dir == others.output_dir
    # The trainings the rows read keep their folders (and so their reuse).
    trained = {run.name: run.output_dir for run in _planner("benchmark", tmp_path, only=["zh_eval"]).order}
    assert all(trained[run.name] == run.output_dir
               for run in _planner("benchmark", tmp_path, rows=["dial2vec"], only=["zh_eval"]).order[:-1])


def _write(tmp_path, text, name="tiny"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text,message", [
    ("run_dir: r\nresults_dir: s\nstepz: []\n", "unknown key 'stepz'"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: vocab, seeds: 3}]\n", "steps[0].seeds must be a string"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: vocabulary}]\n", "unknown tool 'vocabulary'"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: vocab}, {name: a, tool: vocab}]\n", "used twice"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: train, seeds: all}]\n", "declares no seeds"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: vocab, seeds: all}]\nseeds: [1]\n", "takes no seed"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: e, tool: evaluate, models: [{name: m, step: x}]}]\n",
     "unknown step 'x'"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: vocab, flags: {input_file: '{nowhere}'}}]\n",
     "unknown reference {nowhere}"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: e, tool: evaluate, model_seeds: last}]\n",
     "model_seeds must be one of ('all', 'first'), got 'last'"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: vocab}]\ntargets: [b]\n", "target 'b' is not a step"),
    ("run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: vocab}]\ntargets: [a, a]\n", "target 'a' is listed twice"),
    ("name: other\nrun_dir: r\nresults_dir: s\n", "differs from the file's name"),
    ("steps: []\n", "give run_dir and results_dir"),
])
def test_a_bad_spec_is_refused_naming_the_file_and_key(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as error:
        Planner(load_spec(path), str(tmp_path / "runs"), str(tmp_path / "results"), DATA)
    assert message in str(error.value)


TYPO = """\
run_dir: {tmp}/runs
results_dir: {tmp}/results
steps:
  - name: pairs
    tool: pair_records
    flags: {{input_file: "{corpus}", input_format: jsonl, vocab_file: "{{minilm}}/vocab.txt", {pairs_flag}: 1}}
  - name: dse
    tool: train
    flags: {{preset: cpu_dse, train_file: "{{pairs}}/pairs-*", init_checkpoint: "{{minilm}}", {train_flag}: 3}}
  - name: eval
    tool: evaluate
    models: [{{name: m, step: dse}}]
    suite: [{{dataset: D, task: sr, file: "{sr}"}}]
    flags: {{{eval_flag}: 32}}
"""


@pytest.mark.parametrize("flag,value,message", [
    ("train_flag", "num_train_step", "{tmp}/tiny.yaml: steps[1] (dse): train/run_training.py has no flag "
                                     "--num_train_step; did you mean --num_train_steps?"),
    ("eval_flag", "max_seq_lenght", "{tmp}/tiny.yaml: steps[2] (eval): evaluation/run_evaluation.py has no flag "
                                    "--max_seq_lenght; did you mean --max_seq_length?"),
    ("pairs_flag", "min_wordz", "{tmp}/tiny.yaml: steps[0] (pairs): data_prep/create_pair_data.py has no flag "
                                "--min_wordz; did you mean --min_words?"),
    ("sr", "{tmp}/nowhere/select.txt", "1 inputs match nothing: eval: {tmp}/nowhere/select.txt"),
])
def test_a_misspelt_flag_or_a_missing_input_is_found_before_anything_runs(tmp_path, flag, value, message):
    """Each in one line naming the step (a misspelt flag of a later step used to fail only after
    the earlier steps had run, with a traceback): a flag when the file loads, naming it, an input
    by the dry run."""
    (tmp_path / "c.jsonl").write_text("")
    fields = {"tmp": tmp_path, "corpus": tmp_path / "c.jsonl", "sr": tmp_path / "c.jsonl", "pairs_flag": "min_words",
              "train_flag": "num_train_steps", "eval_flag": "max_seq_length"}
    fields[flag] = value.format(tmp=tmp_path)
    path = _write(tmp_path, TYPO.format(**fields))
    with pytest.raises(ValueError) as error:
        planner = Planner(load_spec(path), str(tmp_path / "runs"), str(tmp_path / "results"), DATA)
        check_plan(planner)
    assert str(error.value) == message.format(tmp=tmp_path) or str(error.value).startswith(message.format(tmp=tmp_path))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("tool,flags,message", [
    ("train", "{preset: cpu_dse, train_file: x, num_train_steps: 1.5}", "flag --num_train_steps takes an integer, got 1.5"),
    ("train", "{preset: cpu_dse, train_file: x, learning_rate: fast}", "flag --learning_rate takes a number, got 'fast'"),
    ("train", "{preset: cpu_dsee, train_file: x, temperature: '{params.t}'}",
     "flag --preset refuses it: value should be one of <"),
    ("contrastive_records", "{input_file: x, vocab_file: v, use_given_candidates: 'no'}",
     "flag --use_given_candidates takes true or false, got 'no'"),
    ("contrastive_records", "{input_file: x, vocab_file: v, context_layout: sideways}",
     "flag --context_layout refuses it: value should be one of <"),
    ("mlm_records", "{input_file: x, vocab_file: v, max_predictions_per_seq: [1, 2]}",
     "flag --max_predictions_per_seq takes one value, got [1, 2]"),
])
def test_a_wrongly_typed_flag_is_refused_when_the_file_loads(tmp_path, tool, flags, message):
    path = _write(tmp_path, f"run_dir: r\nresults_dir: s\nparams: {{t: 0.1}}\nsteps:\n"
                            f"  - {{name: a, tool: {tool}, flags: {flags}}}\n")
    with pytest.raises(ValueError) as error:
        load_spec(path)
    assert str(error.value).startswith(f"{path}: steps[0] (a): ") and message in str(error.value)


def test_a_misspelt_varied_flag_is_refused_when_the_file_loads(tmp_path):
    path = _write(tmp_path, "run_dir: r\nresults_dir: s\nsteps:\n  - {name: a, tool: train, "
                            "flags: {preset: cpu_dse, train_file: x}, vary: {temperatur: [0.1, 0.2]}}\n")
    with pytest.raises(ValueError, match=r"steps\[0\] \(a\): vary: .* no flag --temperatur; did you mean --temperature\?"):
        load_spec(path)


def test_every_committed_experiment_loads():
    """Every flag of every step is one its entry point defines, of the type it takes."""
    for name in experiment_names():
        assert get_experiment(name).name == name


def test_a_tool_runs_in_process_by_its_attribute_not_its_name(tmp_path, monkeypatch):
    """The runner knows no tool by name: any tool with `in_process` runs its function here."""
    calls = []

    def note(flags, inputs, output_dir):
        os.makedirs(output_dir)
        calls.append((flags, inputs, output_dir))

    monkeypatch.setitem(TOOLS, "note", Tool(in_process=note))
    path = _write(tmp_path, "run_dir: r\nresults_dir: s\nsteps: [{name: a, tool: note, flags: {text: hi}}]\n")
    run_experiment(Planner(load_spec(path), str(tmp_path / "runs"), str(tmp_path / "results"), DATA), "test")
    assert calls == [({"text": "hi"}, [], str(tmp_path / "runs" / "a"))]
    assert json.loads((tmp_path / "runs" / "a" / STEP_FILE).read_text())["tool"] == "note"


def test_a_yaml_error_keeps_its_line_and_column_in_one_line(tmp_path):
    path = _write(tmp_path, "run_dir: r\nresults_dir: s\nsteps:\n  - {name: a, tool: vocab\n  - {name: b}\n")
    with pytest.raises(ValueError) as error:
        load_spec(path)
    message = str(error.value)
    assert message.startswith(f"{path}:5:") and "not valid YAML" in message and "\n" not in message


def test_an_unknown_parameter_override_is_refused(tmp_path):
    spec = get_experiment("demo")
    with pytest.raises(ValueError, match="has no parameter dcse_step; its parameters: dcse_steps, dial2vec_steps"):
        apply_overrides(spec, ["dcse_step=3"])
    assert apply_overrides(spec, ["dcse_steps=7"]).params.dcse_steps == 7


TINY = """\
run_dir: unused
results_dir: unused
params: {width: 16}
steps:
  - name: config
    tool: bert_config
    flags: {template: "{template}", vocab_file: "{vocab}"}
    results: {bert_config.json: bert_config.json}
  - name: rows
    tool: select_rows
    inputs: ["{part}"]
    flags: {rows: {"dial2vec [seed 12345]": "dial2vec"}}
"""


def _tiny(tmp_path, template_text='{"hidden_size": 16}'):
    (tmp_path / "template.json").write_text(template_text)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\na\n")
    part = REPO_ROOT / "results" / "benchmark" / "parts" / "zh" / "results.json"
    text = TINY.replace("{template}", str(tmp_path / "template.json")).replace("{vocab}", str(tmp_path / "vocab.txt"))
    return load_spec(_write(tmp_path, text.replace("{part}", str(part))))


def test_keys_decide_what_runs_again_and_the_results_folder_records_it(tmp_path, monkeypatch):
    runs, results = str(tmp_path / "runs"), str(tmp_path / "results")
    first = Planner(_tiny(tmp_path), runs, results, DATA)
    assert [run.status for run in first.order] == ["run", "run"]
    run_experiment(first, "dialoguecse-experiment run tiny")
    config = json.loads((tmp_path / "results" / "bert_config.json").read_text())
    assert config == {"hidden_size": 16, "vocab_size": 3}
    rows = json.loads((tmp_path / "runs" / "rows" / "results.json").read_text())
    assert [model["display_name"] for model in rows["models"]] == ["dial2vec"]
    record = json.loads((tmp_path / "results" / "experiment.json").read_text())
    assert [run["status"] for run in record["runs"]] == ["run", "run"]
    assert "dialoguecse-experiment run tiny" in (tmp_path / "results" / "command.txt").read_text()
    text = json.dumps(record)
    assert str(REPO_ROOT) not in text and not any(marker + "/tmp" in text for marker in ('"', "=", " "))

    # Unchanged: the cached step is reused (the selection always runs: it reads what is there now).
    again = Planner(_tiny(tmp_path), runs, results, DATA)
    assert [run.status for run in again.order] == ["reuse", "run"]
    run_experiment(again, "again")
    assert "config\t0 (reused)" in (tmp_path / "results" / "stage_seconds.tsv").read_text()

    # A stopped attempt left files but no step file: the run goes on. A tool that starts afresh
    # takes whole seconds; one that resumes from those files says its seconds are the last attempt's.
    note = "(this attempt only: it resumed a stopped one)"
    tool = TOOLS["bert_config"]
    for resumes in (False, True):
        monkeypatch.setitem(TOOLS, "bert_config", dataclasses.replace(tool, resumes=resumes))
        os.remove(tmp_path / "runs" / "config" / STEP_FILE)
        stopped = Planner(_tiny(tmp_path), runs, results, DATA)
        assert [run.status for run in stopped.order] == ["run", "run"]
        run_experiment(stopped, "after a stop")
        assert (note in (tmp_path / "results" / "stage_seconds.tsv").read_text()) is resumes
        assert json.loads((tmp_path / "runs" / "config" / STEP_FILE).read_text())["resumed"] is resumes
    monkeypatch.undo()

    # An input's content changed: its key changes and it runs again.
    changed = Planner(_tiny(tmp_path, '{"hidden_size": 32}'), runs, results, DATA)
    assert [run.status for run in changed.order] == ["rerun", "run"]
    assert changed.order[0].key != again.order[0].key

    # The tool's version changed (its code writes other bytes for the same settings): it runs again.
    monkeypatch.setitem(TOOLS, "bert_config", dataclasses.replace(tool, version=tool.version + 1))
    assert [run.status for run in Planner(_tiny(tmp_path), runs, results, DATA).order] == ["rerun", "run"]
    monkeypatch.undo()

    # Another experiment's finished run of the same key is linked, not run again.
    elsewhere = Planner(_tiny(tmp_path), str(tmp_path / "other_runs"), results, DATA, reuse_under=(runs,))
    assert elsewhere.order[0].status == "link"
    run_experiment(elsewhere, "elsewhere")
    assert os.path.islink(tmp_path / "other_runs" / "config")
    assert (tmp_path / "other_runs" / "config" / STEP_FILE).exists()

    # The linked step's setting then changes: the link gives way to a run of its own, and the
    # finished run it pointed to is left as it was.
    target = os.path.realpath(tmp_path / "other_runs" / "config")
    before = sorted(os.listdir(target))
    changed = Planner(_tiny(tmp_path, '{"hidden_size": 64}'), str(tmp_path / "other_runs"), results, DATA,
                      reuse_under=(runs,))
    assert changed.order[0].status == "rerun"
    run_experiment(changed, "changed")
    assert not os.path.islink(tmp_path / "other_runs" / "config")
    assert json.loads((tmp_path / "other_runs" / "config" / "bert_config.json").read_text())["hidden_size"] == 64
    assert sorted(os.listdir(target)) == before


PARTS_THEN_TABLE = """\
run_dir: unused
results_dir: unused
steps:
  - name: rows
    tool: select_rows
    inputs: ["{part}"]
    flags: {rows: {"dial2vec [seed 12345]": "dial2vec"}}
    results: {parts/zh/results.json: results.json}
  - name: table
    tool: merge
    inputs: ["{results_dir}/parts/*/results.json"]
    flags: {output_name: table}
"""


def test_a_run_records_the_key_of_what_it_read_when_it_ran(tmp_path):
    """The merge reads a part an earlier run of the same invocation writes: the key it records is
    the one its inputs give afterwards, so the staleness check does not name the folder it made."""
    part = REPO_ROOT / "results" / "benchmark" / "parts" / "zh" / "results.json"
    spec = lambda: load_spec(_write(tmp_path, PARTS_THEN_TABLE.replace("{part}", str(part))))
    runs, results = str(tmp_path / "runs"), str(tmp_path / "results")
    planned = Planner(spec(), runs, results, DATA)
    before = {run.name: run.key for run in planned.order}
    run_experiment(planned, "dialoguecse-experiment run parts_then_table")
    merged = json.loads((tmp_path / "results" / "table.json").read_text())
    assert [row["model"] for row in merged["rows"]] == ["dial2vec"]
    record = json.loads((tmp_path / "results" / "experiment.json").read_text())
    recorded = {run["run"]: run["key"] for run in record["runs"]}
    assert recorded == {run.name: run.key for run in Planner(spec(), runs, results, DATA).order}
    assert recorded["table"] != before["table"] and recorded["rows"] == before["rows"]
    # Asked in another order, the steps still run in the order the experiment declares them.
    assert [run.name for run in Planner(spec(), runs, results, DATA, only=["table", "rows"]).order] == ["rows", "table"]


@pytest.mark.slow
def test_the_benchmark_merge_alone_folds_the_parts_present(tmp_path):
    part = tmp_path / "results" / "parts" / "zh"
    part.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "results" / "benchmark" / "parts" / "zh" / "results.json", part / "results.json")
    done = subprocess.run(
        [sys.executable, "-m", "dialoguecse_tf.cli.experiment", "run", "benchmark", "--only=results",
         f"--run_dir={tmp_path / 'runs'}", f"--results_dir={tmp_path / 'results'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    merged = json.loads((tmp_path / "results" / "results.json").read_text())
    assert [row["model"] for row in merged["rows"]] == [
        "MLM-adapted encoder", "SiameseBERT_M", "DialogueCSE (release)", "DialogueCSE_I2", "SimCSE", "DSE-dropout",
        "DSE", "dial2vec"]
    assert (tmp_path / "results" / "results.png").stat().st_size > 0
    assert "--only=results" in (tmp_path / "results" / "command.txt").read_text()
    assert not (tmp_path / "runs").exists()


def test_a_run_that_declares_no_results_leaves_the_results_folder_records_alone(tmp_path):
    planner = Planner(_tiny(tmp_path), str(tmp_path / "runs"), str(tmp_path / "results"), DATA, only=["rows"])
    run_experiment(planner, "rows only")
    assert (tmp_path / "runs" / "rows" / "results.json").exists()
    assert not (tmp_path / "results" / "command.txt").exists()


def test_a_rerun_drops_the_train_log_of_a_run_the_experiment_no_longer_declares(tmp_path):
    logs = tmp_path / "results" / "train_logs"
    logs.mkdir(parents=True)
    (logs / "empty_text_seed12345.jsonl").write_text("{}\n")
    (logs / "notes.txt").write_text("not a train log")
    run_experiment(Planner(_tiny(tmp_path), str(tmp_path / "runs"), str(tmp_path / "results"), DATA), "rerun")
    assert sorted(os.listdir(logs)) == ["notes.txt"]


def test_a_partial_rerun_keeps_every_train_log_and_a_whole_one_keeps_the_declared(tmp_path):
    """sgd_minilm keeps its trainings' logs: its merge alone (`--only=table`) removes none, a whole
    run only the log of a run it does not declare."""
    logs = tmp_path / "results" / "train_logs"
    logs.mkdir(parents=True)
    for name in ("dialoguecse_i2_seed12345.jsonl", "empty_text_seed12345.jsonl"):
        (logs / name).write_text("{}\n")
    execute._drop_undeclared_train_logs(_planner("sgd_minilm", tmp_path, only=["table"]))
    assert sorted(os.listdir(logs)) == ["dialoguecse_i2_seed12345.jsonl", "empty_text_seed12345.jsonl"]
    execute._drop_undeclared_train_logs(_planner("sgd_minilm", tmp_path))
    assert sorted(os.listdir(logs)) == ["dialoguecse_i2_seed12345.jsonl"]


def test_every_committed_train_log_is_of_a_run_its_experiment_declares(plans):
    for name, planner in plans.items():
        folder = REPO_ROOT / planner.spec.results_dir / "train_logs"
        committed = set(os.listdir(folder)) if folder.is_dir() else set()
        assert committed <= declared_train_logs(planner), (name, sorted(committed - declared_train_logs(planner)))


def test_a_labelled_input_expands_its_path_not_its_label(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text("{}\n")
    labelled = f"SiameseBERT_M [seed 12345]={tmp_path}/a.jsonl"
    assert expand_input(labelled) == [labelled]
    assert expand_input(f"row [seed 1]={tmp_path}/*.jsonl") == [f"row [seed 1]={tmp_path}/{name}"
                                                                 for name in ("a.jsonl", "b.jsonl")]
    assert expand_input(f"{tmp_path}/*.jsonl") == [f"{tmp_path}/a.jsonl", f"{tmp_path}/b.jsonl"]
    with pytest.raises(ValueError, match="no file matches"):
        expand_input(f"{tmp_path}/parts/*/results.json")


def test_every_absolute_path_of_a_recorded_command_is_made_relative():
    inside = str(REPO_ROOT / "runs" / "a" / "encoder")
    assert portable_argument(f"--checkpoint={inside},runs/b/encoder,{inside}") == (
        "--checkpoint=runs/a/encoder,runs/b/encoder,runs/a/encoder")
    assert portable_argument(f"SiameseBERT_M [seed 1]={inside}") == "SiameseBERT_M [seed 1]=runs/a/encoder"
    assert portable_argument(inside) == "runs/a/encoder"
    assert portable_argument("--pooling=mean") == "--pooling=mean"
