import json

from conftest import REPO_ROOT
from dialoguecse_tf.evaluation.results_io import model_record, new_results
from forked_entry_points import run_python
from dialoguecse_tf.evaluation.sweeps import collect_sweep, sweep_markdown, write_sweep
from dialoguecse_tf.evaluation.tables import write_results


def _results(tmp_path, name, corr, map_, models=("DialogueCSE_I2",)):
    results = new_results({}, [{"name": "ECD"}])
    for offset, model in enumerate(models):
        results["models"].append(model_record(model, str(tmp_path), None, "mean", None,
                                              {"ECD": {"corr": corr + offset, "map": map_, "mrr": 70.0}}))
    folder = tmp_path / name
    folder.mkdir()
    return write_results(results, str(folder))


def test_sweep_table_and_plot(tmp_path):
    points = [("0.05", _results(tmp_path, "a", 50.0, 60.0)), ("0.1", _results(tmp_path, "b", 55.5, 61.25))]
    sweep = collect_sweep("temperature", points)
    assert [row["value"] for row in sweep["rows"]] == ["0.05", "0.1"]
    table = sweep_markdown(sweep)
    assert "| temperature | Model | ECD Corr. | ECD MAP | ECD MRR |" in table
    assert "| 0.1 | DialogueCSE_I2 | 55.50 | 61.25 | 70.00 |" in table
    paths = write_sweep(sweep, str(tmp_path / "out"), "temperature")
    assert (tmp_path / "out" / "temperature.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "out" / "temperature.json").read_text())["parameter"] == "temperature"
    assert len(paths) == 3


def test_sweep_puts_two_models_side_by_side_at_every_point(tmp_path):
    models = ("DialogueCSE_I2", "SiameseBERT_M")
    points = [(f"{percent}%", _results(tmp_path, str(percent), 50.0 + percent / 10, 60.0, models))
              for percent in (10, 100)]
    sweep = collect_sweep("train_records", points)
    assert [(row["value"], row["model"]) for row in sweep["rows"]] == [
        ("10%", "DialogueCSE_I2"), ("10%", "SiameseBERT_M"), ("100%", "DialogueCSE_I2"), ("100%", "SiameseBERT_M")]
    assert "| 100% | SiameseBERT_M | 61.00 | 60.00 | 70.00 |" in sweep_markdown(sweep)
    write_sweep(sweep, str(tmp_path / "out"), "scale")
    assert (tmp_path / "out" / "scale.png").read_bytes()[:4] == b"\x89PNG"


def test_sweep_folds_training_seeds_into_mean_and_spread(tmp_path):
    seeds = ("DialogueCSE [seed 1]", "DialogueCSE [seed 2]", "DialogueCSE [seed 3]", "SiameseBERT_M")
    points = [("600", _results(tmp_path, "600", 50.0, 60.0, seeds))]
    sweep = collect_sweep("num_train_steps", points)
    assert [row["model"] for row in sweep["rows"]] == ["DialogueCSE", "SiameseBERT_M"]
    folded = sweep["rows"][0]
    assert folded["seeds"] == [1, 2, 3] and folded["metrics"]["ECD"]["corr"] == 51.0
    assert folded["spread"]["ECD"]["corr"] == 1.0 and "map" in folded["spread"]["ECD"]
    assert [metrics["ECD"]["corr"] for metrics in folded["per_seed"]] == [50.0, 51.0, 52.0]
    table = sweep_markdown(sweep)
    assert "| 600 | DialogueCSE | 51.00 ± 1.00 | 60.00 ± 0.00 | 70.00 ± 0.00 |" in table
    assert "| 600 | SiameseBERT_M | 53.00 | 60.00 | 70.00 |" in table and "training seeds (3)" in table
    write_sweep(sweep, str(tmp_path / "out"), "budget")
    assert (tmp_path / "out" / "budget.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_sweep_entry_point(tmp_path):
    path = _results(tmp_path, "a", 50.0, 60.0)
    done = run_python([REPO_ROOT / "evaluation" / "plot_sweep.py", "--parameter=negatives", f"--point=9={path}",
                       f"--output_dir={tmp_path / 'o'}", "--noplot"], text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "o" / "negatives.md").exists() and not (tmp_path / "o" / "negatives.png").exists()
    bad = run_python([REPO_ROOT / "evaluation" / "plot_sweep.py", "--parameter=x", f"--point={path}",
                      f"--output_dir={tmp_path / 'o'}"], text=True)
    assert bad.returncode != 0 and "VALUE=PATH" in bad.stderr
