"""`experiments.compare`: two runs of an experiment compared number by number."""

import json
import os

import numpy as np
import tensorflow as tf

from dialoguecse_tf.experiments.compare import compare_folders, model_metrics
from forked_entry_points import run_python


def _write_run(root, weight, map_value, losses, seed_rows=(1.0, 2.0)):
    os.makedirs(root / "results", exist_ok=True)
    models = [{"display_name": "A", "checkpoint": str(root / "x"), "metrics": {"D": {"map": map_value, "n": 3}}}]
    models += [{"display_name": "B", "checkpoint": str(root / f"s{i}"), "metrics": {"D": {"map": value}}}
               for i, value in enumerate(seed_rows)]
    (root / "results" / "results.json").write_text(json.dumps({"git_commit": str(root), "models": models}))
    # An evaluation folder's suite, a JSON array: read, and nothing to compare in it.
    (root / "results" / "suite.json").write_text(json.dumps([{"dataset": "D", "task": "sr", "file": str(root)}]))
    encoder = root / "runs" / "train" / "encoder"
    os.makedirs(encoder)
    tf.train.Checkpoint(w=tf.Variable(np.array([1.0, weight], np.float32))).write(str(encoder / "bert_model.ckpt"))
    with open(root / "runs" / "train" / "train_log.jsonl", "w") as f:
        for step, loss in enumerate(losses, 1):
            f.write(json.dumps({"step": step, "loss": loss, "steps_per_second": step * 0.37}) + "\n")


def test_equal_runs_are_identical_whatever_their_paths_commits_and_speed(tmp_path):
    _write_run(tmp_path / "before", 2.0, 71.25, [0.5, 0.25])
    _write_run(tmp_path / "after", 2.0, 71.25, [0.5, 0.25])
    report = compare_folders(str(tmp_path / "before"), str(tmp_path / "after"))
    assert report["identical"]
    assert report["results"]["results/results.json"] == {"values": 4, "differing": 0, "max_abs_diff": 0.0,
                                                         "only_in_one": []}
    assert report["checkpoints"]["runs/train/encoder/bert_model.ckpt.index"]["differing"] == 0
    assert report["train_logs"]["runs/train/train_log.jsonl"]["values"] == 2


def test_a_changed_metric_weight_or_loss_is_found_with_its_size(tmp_path):
    _write_run(tmp_path / "before", 2.0, 71.25, [0.5, 0.25], seed_rows=(1.0, 2.0))
    _write_run(tmp_path / "after", 2.5, 71.25, [0.5, 0.125], seed_rows=(1.0, 2.25))
    report = compare_folders(str(tmp_path / "before"), str(tmp_path / "after"))
    assert not report["identical"]
    assert report["results"]["results/results.json"]["differing"] == 1
    assert report["results"]["results/results.json"]["max_abs_diff"] == 0.25
    assert report["checkpoints"]["runs/train/encoder/bert_model.ckpt.index"]["max_abs_diff"] == 0.5
    assert report["train_logs"]["runs/train/train_log.jsonl"]["max_abs_diff"] == 0.125
    assert not report["within_tolerance"]
    assert compare_folders(str(tmp_path / "before"), str(tmp_path / "after"), tolerance=0.5)["within_tolerance"]


def test_a_file_or_metric_only_one_run_has_is_not_identical(tmp_path):
    _write_run(tmp_path / "before", 2.0, 71.25, [0.5])
    _write_run(tmp_path / "after", 2.0, 71.25, [0.5])
    os.remove(tmp_path / "after" / "runs" / "train" / "train_log.jsonl")
    report = compare_folders(str(tmp_path / "before"), str(tmp_path / "after"))
    assert not report["identical"] and report["unmatched"] == ["runs/train/train_log.jsonl"]
    assert not compare_folders(str(tmp_path / "before"), str(tmp_path / "empty"))["identical"]


def test_seed_rows_of_one_name_are_matched_in_order(tmp_path):
    _write_run(tmp_path, 1.0, 70.0, [0.5], seed_rows=(1.0, 2.0, 3.0))
    assert model_metrics(str(tmp_path / "results" / "results.json")) == {
        "A/D/map": 70.0, "A/D/n": 3.0, "B/D/map": 1.0, "B#2/D/map": 2.0, "B#3/D/map": 3.0}


def test_the_compare_command_passes_equal_runs_and_fails_naming_the_folders(tmp_path):
    _write_run(tmp_path / "before", 2.0, 71.25, [0.5])
    _write_run(tmp_path / "after", 2.0, 71.25, [0.5])
    _write_run(tmp_path / "moved", 2.0, 71.5, [0.5])
    command = ["-m", "dialoguecse_tf.cli.experiment", "compare", str(tmp_path / "before")]
    same = run_python(command + [str(tmp_path / "after"), f"--output={tmp_path / 'report.json'}"], text=True)
    assert same.returncode == 0 and same.stdout.strip().endswith("identical")
    assert json.loads((tmp_path / "report.json").read_text())["identical"]
    moved = run_python(command + [str(tmp_path / "moved")], text=True)
    assert moved.returncode == 1 and "differ beyond 0" in moved.stderr and "moved" in moved.stderr
    loose = run_python(command + [str(tmp_path / "moved"), "--tolerance=0.5"], text=True)
    assert loose.returncode == 0 and "equal within 0.5" in loose.stdout
