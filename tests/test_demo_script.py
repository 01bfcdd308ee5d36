"""run_scripts/demo.sh, the first Quick start command, end to end with 2 training steps per objective."""

import json
import os
import subprocess

import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.slow

MODELS = ["MiniLM (untouched)", "DialogueCSE_I2", "DSE", "dial2vec"]


def test_demo_trains_the_three_objectives_evaluates_every_task_and_exports(tmp_path):
    env = {**os.environ, "RUN_DIR": str(tmp_path / "demo"), "RESULTS_DIR": str(tmp_path / "results"),
           "DCSE_STEPS": "2", "DSE_STEPS": "2", "DIAL2VEC_STEPS": "2"}
    done = subprocess.run(["bash", str(REPO_ROOT / "run_scripts" / "demo.sh")], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    stages = ["corpus", "contrastive_records", "pair_records", "dialogue_records", "train_dialoguecse_i2_2steps",
              "train_dse_2steps", "train_dial2vec_2steps", "eval", "export_savedmodel_2steps",
              "export_huggingface_2steps", "export_keras_hub_2steps", "merge"]
    assert all(f"--- {stage} done in" in done.stdout for stage in stages), done.stdout[-3000:]

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

    export = tmp_path / "demo" / "export" / "dialoguecse_i2_2steps"
    assert (export / "savedmodel" / "1" / "saved_model.pb").exists()
    assert (export / "huggingface" / "model.safetensors").exists()
    drift = json.loads((tmp_path / "results" / "keras_hub_export.json").read_text())["keras_hub_drift"]
    assert drift["min_cosine"] > 0.999
    assert "bash run_scripts/demo.sh" in (tmp_path / "results" / "command.txt").read_text()
