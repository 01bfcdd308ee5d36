import json

import pytest

from conftest import REPO_ROOT
from forked_entry_points import run_python
from dialoguecse_tf.evaluation.train_curves import line_style, load_curves, summarize, write_curves


def _log(path, values, with_cosines=True):
    with open(path, "w", encoding="utf-8") as writer:
        for step, value in enumerate(values, 1):
            entry = {"step": step * 10, "loss": value, "learning_rate": 1e-4}
            if with_cosines:
                entry.update(positive_ranked_first=1.0 / value, positive_cosine=0.9, negative_cosine=0.9 - value,
                             cosine_gap=value)
            writer.write(json.dumps(entry) + "\n")
        writer.write(json.dumps({"step": len(values) * 10, "eval_map": 50.0}) + "\n")
    return str(path)


def test_summary_averages_the_first_and_last_window_and_skips_evaluation_entries(tmp_path):
    curves = load_curves([("dialoguecse", _log(tmp_path / "a.jsonl", [4.0, 2.0, 1.0, 1.0])),
                          ("mlm", _log(tmp_path / "b.jsonl", [3.0, 1.0], with_cosines=False))])
    assert curves["dialoguecse"]["steps"] == [10, 20, 30, 40]
    assert "positive_cosine" not in curves["mlm"]
    rows = {(row["run"], row["metric"]): row for row in summarize(curves, window=2)}
    assert rows[("dialoguecse", "loss")]["start"] == 3.0 and rows[("dialoguecse", "loss")]["end"] == 1.0
    assert rows[("dialoguecse", "cosine_gap")]["end"] == 1.0
    assert rows[("dialoguecse", "positive_ranked_first")]["start"] == pytest.approx(0.375)
    assert ("mlm", "negative_cosine") not in rows and rows[("mlm", "loss")]["last_step"] == 20
    paths = write_curves(curves, str(tmp_path / "out"), "curves", window=2)
    assert (tmp_path / "out" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "| dialoguecse | loss | 3.0000 | 1.0000 | -2.0000 |" in open(paths[1], encoding="utf-8").read()


def test_runs_past_ten_keep_distinct_lines():
    styles = [tuple(sorted(line_style(index).items())) for index in range(12)]
    assert len(set(styles)) == 12
    assert line_style(10)["color"] == line_style(0)["color"] and line_style(10)["linestyle"] != "-"


def test_a_log_without_training_entries_is_refused(tmp_path):
    path = tmp_path / "eval_only.jsonl"
    path.write_text(json.dumps({"step": 5, "eval_map": 1.0}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no training entry"):
        load_curves([("x", str(path))])


def test_plot_train_logs_entry_point(tmp_path):
    log = _log(tmp_path / "a.jsonl", [2.0, 1.0])
    bad = run_python([REPO_ROOT / "evaluation" / "plot_train_logs.py", f"--log={log}", f"--output_dir={tmp_path / 'o'}"],
                     text=True)
    assert bad.returncode != 0 and "VALUE=PATH" in bad.stderr
    done = run_python([REPO_ROOT / "evaluation" / "plot_train_logs.py", f"--log=DialogueCSE_I2={log}",
                       f"--output_dir={tmp_path / 'o'}", "--noplot"], text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "o" / "train_curves.md").exists() and not (tmp_path / "o" / "train_curves.png").exists()
