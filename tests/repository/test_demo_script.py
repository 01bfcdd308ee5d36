"""run_scripts/demo.sh, the first Quick start command, end to end with 2 training steps per
objective: the demo experiment (experiments/demo.yaml) through the runner, on a tenth of its corpus
(what the test checks does not depend on the corpus size; the full size is the committed
results/demo)."""

import json
import subprocess

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.slow

MODELS = ["MiniLM (untouched)", "DialogueCSE_I2", "DSE", "dial2vec"]
RUNS = ["corpus", "contrastive_records", "pair_records", "dialogue_records", "dialoguecse_i2", "dse", "dial2vec",
        "eval", "export_savedmodel", "export_huggingface", "export_keras_hub", "table"]


def test_demo_trains_the_three_objectives_evaluates_every_task_and_exports(tmp_path):
    command = ["bash", str(REPO_ROOT / "run_scripts" / "demo.sh"), f"--run_dir={tmp_path / 'demo'}",
               f"--results_dir={tmp_path / 'results'}", "--set=dcse_steps=2", "--set=dse_steps=2",
               "--set=dial2vec_steps=2", "--set=num_dialogues=300", "--set=num_eval_dialogues=200",
               "--reuse_under="]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    missing = [run for run in RUNS if f"--- {run} done in" not in done.stderr]
    assert not missing, (missing, done.stderr[:3000])

    table = json.loads((tmp_path / "results" / "results_table.json").read_text())
    assert [row["model"] for row in table["rows"]] == MODELS
    every_task = {"corr", "map", "mrr", "acc_1shot", "acc_5shot", "oos_1shot_oos_recall", "oos_5shot_oos_recall", "purity",
                  "nmi", "spearman", "dialogue_map"}
    for row in table["rows"]:
        metrics = row["metrics"]["Demo"]
        assert every_task <= set(metrics), sorted(metrics)
        assert all(0 <= metrics[key] <= 100 for key in every_task if key not in ("corr", "spearman")), metrics
    # Even two steps move an encoder: each trained row differs from MiniLM's somewhere.
    minilm = table["rows"][0]["metrics"]["Demo"]
    assert all(row["metrics"]["Demo"] != minilm for row in table["rows"][1:])

    assert (tmp_path / "demo" / "export_savedmodel" / "savedmodel" / "1" / "saved_model.pb").exists()
    assert (tmp_path / "demo" / "export_huggingface" / "model" / "model.safetensors").exists()
    drift = json.loads((tmp_path / "results" / "keras_hub_export.json").read_text())["keras_hub_drift"]
    assert drift["min_cosine"] > 0.999
    assert "dialoguecse-experiment run demo" in (tmp_path / "results" / "command.txt").read_text()

    # A second run reuses every finished run and trains nothing (--reuse_under= keeps both runs to
    # this test's folder: finished runs of the same keys elsewhere under runs/ would be linked).
    again = subprocess.run(command + ["--dry_run"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "12 runs (11 reused)" in again.stdout, again.stdout
