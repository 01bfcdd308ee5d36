"""Evaluation suites as data (`evaluation/suite.py`): entries from strings, files and the flags
they replace, and the evaluators built from them."""

import json

import numpy as np
import pytest

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.readers import write_jsonl
from dialoguecse_tf.evaluation import suite as suite_module
from dialoguecse_tf.evaluation.suite import (EvaluationSuite, SuiteEntry, load_suite, parse_entry, suite_from_legacy,
                                             write_suite)
from dialoguecse_tf.evaluation.tasks import base, registry  # noqa: F401 (registers the tasks)


def test_an_entry_string_splits_at_its_first_two_colons():
    assert parse_entry("ECD:sr:../data/ecd:dev/select.txt") == SuiteEntry("ECD", "sr", "../data/ecd:dev/select.txt")
    assert str(parse_entry("SGD-dev:clustering:C:/sgd")) == "SGD-dev:clustering:C:/sgd"
    for text in ("ECD", "ECD:sr", "ECD::select.txt", ":sr:select.txt", "ECD:sr:"):
        with pytest.raises(ValueError, match=rf"evaluation task '{text}': expected DATASET:TASK:PATH"):
            parse_entry(text)
    with pytest.raises(ValueError, match="evaluation task 'ECD:map:s.txt': unknown evaluation task 'map'; known "
                                         "tasks: dsts, sr, intent, oos, rs_utterance, rs_dialogue, intent_ft, dialogue_act, "
                                         "clustering, relatedness, dialogue_retrieval"):
        parse_entry("ECD:map:s.txt")


def test_a_suite_file_round_trips_and_its_bad_entries_are_named(tmp_path):
    sts, sgd = tmp_path / "sts.txt", tmp_path / "sgd"
    sts.write_text("5\ta\tb\n", encoding="utf-8")
    sgd.mkdir()
    entries = [SuiteEntry("ECD", "dsts", str(sts)), SuiteEntry("SGD", "clustering", str(sgd))]
    path = tmp_path / "suite.json"
    write_suite(str(path), entries)
    assert json.loads(path.read_text(encoding="utf-8"))[0] == {"dataset": "ECD", "task": "dsts", "file": str(sts)}
    assert load_suite(str(path)) == entries

    good = {"dataset": "ECD", "task": "dsts", "file": str(sts)}
    cases = [
        ({"dataset": "ECD"}, "must be a non-empty JSON list"),
        ([], "must be a non-empty JSON list"),
        ([good, "ECD:sr:x"], "entry 1: expected an object with dataset, task and file, got str"),
        ([{**good, "split": "dev"}], r"entry 0: unknown keys \['split'\] \(an entry has dataset, task and file\)"),
        ([{"dataset": "ECD", "task": "dsts"}], r"entry 0: missing keys \['file'\]"),
        ([good, {**good, "task": "sts"}], "entry 1: unknown evaluation task 'sts'"),
        ([{**good, "dataset": ""}], "entry 0: an evaluation suite entry's dataset must be a non-empty string"),
        ([{**good, "file": str(tmp_path / "nope.txt")}], f"entry 0: dsts file of dataset 'ECD' not found: "
                                                         f"{tmp_path / 'nope.txt'}"),
        # Only the tasks that read folders take one.
        ([{**good, "file": str(sgd)}], "entry 0: dsts file of dataset 'ECD' not found"),
        ([good, good], "lists task 'dsts' of dataset 'ECD' twice"),
    ]
    for value, message in cases:
        path.write_text(json.dumps(value), encoding="utf-8")
        with pytest.raises(ValueError, match=message) as raised:
            load_suite(str(path))
        assert str(raised.value).startswith(f"{path}") and "\n" not in str(raised.value)
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{path}: not valid JSON"):
        load_suite(str(path))


def test_the_old_per_dataset_flags_become_entries():
    entries = suite_from_legacy(("Banking77", "CLINC150", "SGD"), {
        "intent_file": ("b77", "clinc.json", ""), "oos_file": ("", "clinc.json", ""), "dialogue_file": ("", "", "sgd")})
    assert entries == [SuiteEntry("Banking77", "intent", "b77"), SuiteEntry("CLINC150", "intent", "clinc.json"),
                       SuiteEntry("CLINC150", "oos", "clinc.json"), SuiteEntry("SGD", "clustering", "sgd"),
                       SuiteEntry("SGD", "relatedness", "sgd"), SuiteEntry("SGD", "dialogue_retrieval", "sgd")]
    assert suite_from_legacy((), {"select_file": ("s.txt",)}) == [SuiteEntry("dev", "sr", "s.txt")]
    with pytest.raises(ValueError, match=r"no evaluation file flag \['eval_file'\]"):
        suite_from_legacy((), {"eval_file": ("s.txt",)})
    with pytest.raises(ValueError, match="2 datasets but 1 sts_file values"):
        suite_from_legacy(("A", "B"), {"select_file": ("a", "b"), "sts_file": ("a",)})


def _dialogues(path):
    words = {"A_1": "order refund money back", "B_1": "delivery address ship package", "C_2": "hello thanks"}
    write_jsonl([Dialogue(f"{service}-{i}", tuple(Turn("USER" if t % 2 == 0 else "SYSTEM", f"{text} {t}")
                                                  for t in range(4)), services=(service,))
                 for service, text in words.items() for i in range(3)], path)
    return str(path)


def _oos_set(path):
    items = {label: [[f"{label} item {i}", label] for i in range(10)] for label in ("refund", "ship", "oos")}
    path.write_text(json.dumps({"train": items["refund"][:6] + items["ship"][:6], "test": items["refund"][6:]
                                + items["ship"][6:], "oos_train": items["oos"][:6], "oos_test": items["oos"][6:]}),
                    encoding="utf-8")
    return str(path)


def test_tasks_of_one_dataset_on_one_file_read_it_once(tmp_path, monkeypatch):
    from dialoguecse_tf.evaluation.tasks import dialogue_base, intent

    reads = []

    def counted(module, name):
        function = getattr(module, name)
        monkeypatch.setattr(module, name, lambda path, *args: reads.append(path) or function(path, *args))

    counted(dialogue_base, "read_labelled_dialogues")
    counted(intent, "read_intent_dataset")
    dialogues, clinc = _dialogues(tmp_path / "dialogues.jsonl"), _oos_set(tmp_path / "clinc.json")
    entries = [SuiteEntry("SGD", task, dialogues) for task in ("dialogue_retrieval", "relatedness", "clustering")]
    entries += [SuiteEntry("CLINC150", "oos", clinc), SuiteEntry("CLINC150", "intent", clinc),
                SuiteEntry("again", "clustering", dialogues)]
    suite = EvaluationSuite.from_entries(entries, {"dialogue_label": "domain"})
    assert sorted(reads) == sorted([dialogues, clinc, dialogues])
    assert [dataset.name for dataset in suite.datasets] == ["SGD", "CLINC150", "again"]
    assert [[e.name for e in dataset.evaluators] for dataset in suite.datasets] == [
        ["clustering", "relatedness", "dialogue_retrieval"], ["intent", "oos"], ["clustering"]]
    sgd = suite.datasets[0]
    assert all(evaluator.data is sgd.evaluators[0].data for evaluator in sgd.evaluators)
    assert sgd.record()["relatedness_label"] == "domain" and sgd.evaluators[0].data.labels[0] == "A"
    # What each evaluator gives is what it gives built alone.
    vectors = {}

    def encode_dialogues(batch):
        return np.stack([vectors.setdefault(d.dialogue_id, np.random.default_rng(len(vectors)).normal(size=8))
                         for d in batch])

    from dialoguecse_tf.evaluation.tasks.relatedness import RelatednessEvaluator

    alone = RelatednessEvaluator(dialogues, dialogue_label="domain")(encode_dialogues)
    assert sgd.evaluators[1](encode_dialogues) == alone


def test_a_registered_task_is_a_suite_task_with_nothing_else_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(base, "TASKS", dict(base.TASKS))

    @base.register_task
    class LengthEvaluator(base.Evaluator):
        name = "length"
        task = "length"
        label = "Length"
        count_key = "length_lines"
        description = "mean vector norm of a file's lines"
        metrics = (("norm", "Norm"),)
        primary_metric = "norm"

        @staticmethod
        def read(path):
            return open(path, encoding="utf-8").read().split()

        @property
        def size(self):
            return len(self.data)

        def __call__(self, encode):
            return {"norm": float(np.linalg.norm(encode(self.data), axis=1).mean())}

    path = tmp_path / "lines.txt"
    path.write_text("a\nbb\n", encoding="utf-8")
    suite = EvaluationSuite.from_entries(suite_module.suite_entries(None, [f"toy:length:{path}"]))
    assert suite(lambda texts: np.array([[len(text), 0.0] for text in texts])) == {"toy": {"norm": 1.5}}
    assert suite.datasets[0].record()["length_lines"] == 2
    with pytest.raises(ValueError, match="evaluation task name 'length' is registered twice"):
        base.register_task(LengthEvaluator)


def test_training_reads_the_same_suites_and_its_old_evaluation_flags_as_dataset_dev():
    from dialoguecse_tf.stage_config import TrainConfig

    assert TrainConfig().eval_entries() == []
    assert TrainConfig(eval_select_file="s.txt", eval_dialogue_file="sgd").eval_entries() == [
        SuiteEntry("dev", "sr", "s.txt"), SuiteEntry("dev", "clustering", "sgd"),
        SuiteEntry("dev", "relatedness", "sgd"), SuiteEntry("dev", "dialogue_retrieval", "sgd")]
    assert TrainConfig(eval_task=("A:dsts:a.txt", "B:intent:b")).eval_entries() == [
        SuiteEntry("A", "dsts", "a.txt"), SuiteEntry("B", "intent", "b")]
    with pytest.raises(ValueError, match="evaluation task 'A:sts:a.txt': unknown evaluation task 'sts'"):
        TrainConfig(eval_task=("A:sts:a.txt",))
    with pytest.raises(ValueError, match="either as eval_task/eval_suite or as eval_select_file, not both"):
        TrainConfig(eval_task=("A:dsts:a.txt",), eval_select_file="s.txt")
