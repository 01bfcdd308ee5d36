"""dialoguecse_tf/experiments/staleness.py: a committed results folder is planned again from its
recorded command; one whose keys the current code computes differently is named unless
results/SUPERSEDED.md keeps it, and a changed default changes the keys of the runs that relied on it.
(The committed results themselves are checked by `dialoguecse-experiment docs --check` in
tests/experiments/test_doc_tables.py.)"""

import dataclasses
import json
import shutil

import pytest

from conftest import REPO_ROOT, SHARED_DATA
from dialoguecse_tf.config_fields import field
from dialoguecse_tf.evaluation.config import EvaluationConfig
from dialoguecse_tf.experiments import plan
from dialoguecse_tf.experiments.execute import experiment_record
from dialoguecse_tf.experiments.plan import Planner
from dialoguecse_tf.experiments.spec import get_experiment
from dialoguecse_tf.experiments.staleness import (STALE_SECTION, check_results, listed_but_current, listed_stale,
                                                  recorded_command)
from dialoguecse_tf.objectives.dialoguecse import DialogueCSEObjective, DialogueCSEOptions

# A small experiment (ECD data only, so planning it is quick), as the runner would record it.
EXPERIMENT = "ecd_study_empty_rounds"
FOLDER = "results/study"


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A repository holding one results folder the current code makes: `{repo}` (where its runs
    read the small BERT's template) is this folder."""
    (tmp_path / "experiments" / "configs").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "experiments" / "configs" / "small_bert.json", tmp_path / "experiments" / "configs")
    monkeypatch.setattr(plan, "REPO_ROOT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    planner = Planner(get_experiment(EXPERIMENT), "runs/study", FOLDER, str(SHARED_DATA))
    (tmp_path / FOLDER).mkdir(parents=True)
    runs = [{"run": run.name, "tool": run.step.tool, "key": run.key} for run in planner.order]
    (tmp_path / FOLDER / "experiment.json").write_text(json.dumps(experiment_record(planner, runs)))
    (tmp_path / FOLDER / "command.txt").write_text(
        f"# produced by:\ndialoguecse-experiment run {EXPERIMENT} --run_dir=runs/study\n# commit: x\n")
    return tmp_path


def _check(repo):
    unlisted, listed = check_results(str(repo), str(SHARED_DATA))
    return [check.folder for check in unlisted], [check.folder for check in listed]


def test_a_current_folder_passes_and_a_changed_key_is_named_unless_listed(planted):
    assert _check(planted) == ([], [])

    record_file = planted / FOLDER / "experiment.json"
    record = json.loads(record_file.read_text())
    run = next(run for run in record["runs"] if run["tool"] == "train")
    run["key"] = "0" * 16
    record_file.write_text(json.dumps(record))
    unlisted, listed = check_results(str(planted), str(SHARED_DATA))
    assert [check.folder for check in unlisted] == [FOLDER] and not listed
    assert unlisted[0].changed == [run["run"]] and run["run"] in unlisted[0].describe()

    # Kept knowingly: the stale section of SUPERSEDED.md lists it (another section does not count).
    superseded = planted / "results" / "SUPERSEDED.md"
    superseded.write_text(f"# Results\n\n## Rerun in place\n\n| Folder |\n|:--|\n| `{FOLDER}/` |\n")
    assert _check(planted) == ([FOLDER], [])
    superseded.write_text(superseded.read_text() + f"\n{STALE_SECTION}\n\n| Folder | Why |\n|:--|:--|\n"
                          f"| `{FOLDER}/` (table, `stage_seconds.tsv`) | made before a change |\n\n## Later\n\n"
                          "| `results/other/` | x |\n")
    assert listed_stale(str(planted)) == {FOLDER}
    assert _check(planted) == ([], [FOLDER])


def test_a_listing_that_outlives_its_rerun_is_named(planted):
    (planted / "results" / "SUPERSEDED.md").write_text(
        f"# Results\n\n{STALE_SECTION}\n\n| Folder | Why |\n|:--|:--|\n| `{FOLDER}/` | made before a change |\n")
    record_file = planted / FOLDER / "experiment.json"
    current = record_file.read_text()
    record = json.loads(current)
    next(run for run in record["runs"] if run["tool"] == "train")["key"] = "0" * 16
    record_file.write_text(json.dumps(record))
    _, listed = check_results(str(planted), str(SHARED_DATA))
    assert listed_but_current(str(planted), listed) == []

    record_file.write_text(current)  # rerun on the current code
    _, listed = check_results(str(planted), str(SHARED_DATA))
    assert not listed and listed_but_current(str(planted), listed) == [FOLDER]


def test_a_folder_reading_a_stale_folders_results_is_stale_with_it(planted):
    """A table merged from parts, or rows selected from another experiment's table: the reader's
    own keys hold, but what it read would change."""
    reader = planted / "results" / "reader"
    shutil.copytree(planted / FOLDER, reader)
    record = json.loads((reader / "experiment.json").read_text())
    record["external_digests"][f"{FOLDER}/*.json"] = "0" * 64
    (reader / "experiment.json").write_text(json.dumps(record))
    assert _check(planted) == ([], [])
    source = json.loads((planted / FOLDER / "experiment.json").read_text())
    source["runs"][-1]["key"] = "0" * 16
    (planted / FOLDER / "experiment.json").write_text(json.dumps(source))
    unlisted, _ = check_results(str(planted), str(SHARED_DATA))
    assert [check.folder for check in unlisted] == ["results/reader", FOLDER]
    assert unlisted[0].describe() == f"results/reader (reads the stale {FOLDER})"


def test_a_folder_whose_experiment_is_gone_is_named(planted):
    command = planted / FOLDER / "command.txt"
    command.write_text(command.read_text().replace(f"run {EXPERIMENT}", "run no_such_experiment"))
    unlisted, _ = check_results(str(planted), str(SHARED_DATA))
    assert [check.folder for check in unlisted] == [FOLDER] and "cannot be planned again" in unlisted[0].describe()


def test_an_input_gone_from_the_machine_is_read_from_its_recorded_digest(planted):
    """An input gone from the machine (another experiment's run; here the small BERT template)
    is keyed by the digest the folder recorded; without that record the key is the path's text
    and the folder is stale."""
    template = planted / "experiments" / "configs" / "small_bert.json"
    record = json.loads((planted / FOLDER / "experiment.json").read_text())
    assert "./experiments/configs/small_bert.json" in record["external_digests"]
    template.unlink()
    assert _check(planted) == ([], [])
    record["external_digests"] = {}
    (planted / FOLDER / "experiment.json").write_text(json.dumps(record))
    assert _check(planted) == ([FOLDER], [])


def test_a_changed_default_changes_the_keys_of_the_runs_that_rely_on_it(monkeypatch, tmp_path):
    spec = get_experiment(EXPERIMENT)

    def keys():
        planner = Planner(spec, str(tmp_path / "runs"), str(tmp_path / "results"), str(SHARED_DATA))
        return {run.name: run.key for run in planner.order}

    before = keys()
    batch_size = EvaluationConfig.__dataclass_fields__["batch_size"]
    monkeypatch.setattr(batch_size, "default", batch_size.default + 1)
    after = keys()
    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == ["eval_study", "table"], changed  # the evaluation and the table merged from it

    # A training default: an option of the objective that neither the presets nor the steps set.
    monkeypatch.undo()

    @dataclasses.dataclass(frozen=True)
    class Changed(DialogueCSEOptions):
        min_learning_rate: float = field(2e-5, "changed", minimum=0.0)

    monkeypatch.setattr(DialogueCSEObjective, "options_class", Changed)
    trained = keys()
    changed = {name for name in before if before[name] != trained[name]}
    trains = {run.name for run in Planner(spec, str(tmp_path / "runs"), str(tmp_path / "results"),
                                          str(SHARED_DATA)).order if run.step.tool == "train"}
    assert {name for name in trains if name != "mlm"} <= changed and "mlm" not in changed
    assert not any(name.endswith("records") for name in changed)


def test_an_option_added_at_its_former_behaviour_keeps_the_keys(monkeypatch, tmp_path):
    spec = get_experiment(EXPERIMENT)

    def keys(options_class):
        monkeypatch.setattr(DialogueCSEObjective, "options_class", options_class)
        planner = Planner(spec, str(tmp_path / "runs"), str(tmp_path / "results"), str(SHARED_DATA))
        return {run.name: run.key for run in planner.order}

    @dataclasses.dataclass(frozen=True)
    class Added(DialogueCSEOptions):
        new_option: bool = field(False, "added later; False does what runs did before", added_as=False)

    @dataclasses.dataclass(frozen=True)
    class DefaultChanged(DialogueCSEOptions):
        new_option: bool = field(True, "its default changed since", added_as=False)

    before = keys(DialogueCSEOptions)
    assert keys(Added) == before
    changed = keys(DefaultChanged)
    assert {name for name in before if changed[name] != before[name]} >= {"baseline_seed12345", "zero_seed12345"}


def test_the_recorded_command_is_read_with_its_runner_flags(tmp_path):
    (tmp_path / "command.txt").write_text(
        "# produced by:\ndialoguecse-experiment run sgd_study --only=eval_study,table --rows=a,b "
        "--set steps=3 --seeds=1\n# commit: abc\n")
    assert recorded_command(str(tmp_path)) == {"name": "sgd_study", "only": ["eval_study,table"], "rows": ["a,b"],
                                               "set": ["steps=3"], "seeds": ["1"]}
