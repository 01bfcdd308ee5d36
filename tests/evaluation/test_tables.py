import dataclasses
import datetime
import json
import os
import subprocess
import sys

import pytest

from dialoguecse_tf.evaluation.findings import GAP_ONLY, cells, outcome
from dialoguecse_tf.evaluation.provenance import REPO_ROOT, dataset_file_record, file_sha256, git_commit, portable_path
from dialoguecse_tf.evaluation.results_io import model_record, new_results, read_results
from dialoguecse_tf.evaluation.tables import (
    _BEST_NOTE,
    aggregate_seeds,
    merge_results,
    seed_row_name,
    table_columns,
    write_results,
    write_table,
)
from dialoguecse_tf.evaluation.tasks.registry import metric_columns


def make_results(tmp_path, dataset="ECD", models=(("BERT-avg", 43.68, 51.77, 70.79),), sts_text="5\ta\tb\n"):
    data = tmp_path / dataset
    data.mkdir(exist_ok=True)
    (data / "select.txt").write_text("0\ta\t\t1\t\n1\tb\t\t0\t\n", encoding="utf-8")
    (data / "sts.txt").write_text(sts_text, encoding="utf-8")
    record = {"name": dataset, **dataset_file_record("select", "sr_queries", str(data / "select.txt"), 2),
              **dataset_file_record("sts", "sts_pairs", str(data / "sts.txt"), 1)}
    results = new_results({"batch_size": 8}, [record])
    for name, corr, map_, mrr in models:
        results["models"].append(model_record(
            name, str(tmp_path / "ckpt"), "avg", "mean pooling", None,
            {dataset: {"corr": corr, "map": map_, "mrr": mrr}},
        ))
    return results


def test_results_json_fields_and_markdown(tmp_path):
    models = (("BERT-avg", 43.68, 51.77, 70.79), ("BERT(adapt)-flow", 74.3, 59.77, 76.48))
    results = make_results(tmp_path, models=models)
    out = tmp_path / "out"
    path = write_results(results, str(out))
    assert sorted(os.listdir(out)) == ["results.json", "results.md"]  # nothing temporary left behind
    saved = json.loads(open(path, encoding="utf-8").read())
    assert saved["format_version"] == 1 and saved["config"] == {"batch_size": 8}
    assert datetime.datetime.fromisoformat(saved["created_utc"]).utcoffset() == datetime.timedelta(0)
    assert saved["git_commit"] == git_commit()
    dataset = saved["datasets"][0]
    # Paths relative to the repository: results hold no machine's absolute layout.
    assert dataset["select_file"] == os.path.relpath(tmp_path / "ECD" / "select.txt", REPO_ROOT)
    assert dataset["sr_queries"] == 2
    assert dataset["select_sha256"] == file_sha256(str(tmp_path / "ECD" / "select.txt"))
    assert len(dataset["sts_sha256"]) == 64 and dataset["sts_pairs"] == 1
    model = saved["models"][1]
    assert model["display_name"] == "BERT(adapt)-flow"
    assert model["checkpoint"] == os.path.relpath(tmp_path / "ckpt", REPO_ROOT)
    assert model["metrics"] == {"ECD": {"corr": 74.3, "map": 59.77, "mrr": 76.48}}
    markdown = (out / "results.md").read_text(encoding="utf-8")
    lines = markdown.splitlines()
    assert lines[0] == "| Model | ECD Corr. | ECD MAP | ECD MRR |"
    assert lines[2] == "| BERT-avg | 43.68 | 51.77 | 70.79 |"
    assert lines[3] == "| BERT(adapt)-flow | 74.30 | 59.77 | 76.48 |"
    assert "percentages" in markdown and "(2 queries)" in markdown and "mean pooling" in markdown
    assert f"SR `{dataset['select_file']}` (2 queries)" in markdown and "D-STS `" in markdown


def test_git_commit_is_a_sha_or_none(monkeypatch):
    commit = git_commit()
    assert commit is None or (len(commit) == 40 and int(commit, 16) >= 0)

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert git_commit() is None


def test_merge_joins_datasets_into_rows(tmp_path):
    ecd_models = (("DialogueCSE", 83.94, 69.32, 81.2), ("BERT-avg", 43.68, 51.77, 70.79))
    ecd = write_results(make_results(tmp_path, "ECD", ecd_models), str(tmp_path / "ecd"))
    jddc_models = (("DialogueCSE", 81.22, 68.02, 79.52),)
    jddc = write_results(make_results(tmp_path, "JDDC", jddc_models), str(tmp_path / "jddc"))
    table = merge_results([ecd, jddc])
    assert [dataset["name"] for dataset in table.datasets] == ["ECD", "JDDC"]
    assert [row.model for row in table.rows] == ["DialogueCSE", "BERT-avg"]
    assert table.rows[0].sources == [portable_path(ecd), portable_path(jddc)]
    lines = table.to_markdown().splitlines()
    assert lines[0] == "| Model | ECD Corr. | ECD MAP | ECD MRR | JDDC Corr. | JDDC MAP | JDDC MRR |"
    assert lines[2] == "| DialogueCSE | 83.94 | 69.32 | 81.20 | 81.22 | 68.02 | 79.52 |"
    assert lines[3] == "| BERT-avg | 43.68 | 51.77 | 70.79 | – | – | – |"
    markdown_path, json_path = write_table(table, str(tmp_path / "merged"))
    assert open(markdown_path, encoding="utf-8").read() == table.to_markdown()
    saved_rows = json.load(open(json_path, encoding="utf-8"))["rows"]
    assert saved_rows[1]["metrics"] == {"ECD": {"corr": 43.68, "map": 51.77, "mrr": 70.79}}


def test_merge_refuses_conflicts(tmp_path):
    first = write_results(make_results(tmp_path, "ECD", (("M", 1.0, 2.0, 3.0),)), str(tmp_path / "a"))
    other_numbers = write_results(make_results(tmp_path, "ECD", (("M", 1.5, 2.0, 3.0),)), str(tmp_path / "b"))
    with pytest.raises(ValueError, match=r"M on ECD has corr 1.0 in .*a/results.json but 1.5 in .*b/results.json"):
        merge_results([first, other_numbers])
    assert len(merge_results([first, first]).rows) == 1
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_files = write_results(
        make_results(elsewhere, "ECD", (("N", 1.0, 2.0, 3.0),), sts_text="4\tc\td\n"), str(tmp_path / "c")
    )
    with pytest.raises(ValueError, match="dataset 'ECD' means different sts_files"):
        merge_results([first, other_files])


def test_seed_rows_fold_into_mean_and_sample_std(tmp_path):
    models = ((seed_row_name("DialogueCSE_I2", 1), 50.0, 60.0, 70.0), ("BERT-avg", 40.0, 50.0, 60.0),
              (seed_row_name("DialogueCSE_I2", 2), 52.0, 61.0, 70.0),
              (seed_row_name("DialogueCSE_I2", 3), 57.0, 62.0, 70.0), (seed_row_name("Siamese", 7), 1.0, 2.0, 3.0))
    path = write_results(make_results(tmp_path, "ECD", models), str(tmp_path / "r"))
    table = aggregate_seeds(merge_results([path]))
    assert [row.model for row in table.rows] == ["DialogueCSE_I2", "BERT-avg", "Siamese"]
    folded = table.rows[0]
    assert folded.seeds == [1, 2, 3]
    assert folded.metrics["ECD"]["corr"] == pytest.approx(53.0)
    # Sample standard deviation: squared deviations 9, 1, 16 over n - 1 = 2.
    assert folded.spread["ECD"]["corr"] == pytest.approx((26 / 2) ** 0.5)
    assert folded.spread["ECD"]["mrr"] == 0.0
    assert [metrics["ECD"]["corr"] for metrics in folded.per_seed] == [50.0, 52.0, 57.0]
    lines = table.to_markdown().splitlines()
    assert lines[2] == "| DialogueCSE_I2 (3 seeds) | 53.00 ± 3.61 | 61.00 ± 1.00 | 70.00 ± 0.00 |"
    assert lines[3] == "| BERT-avg | 40.00 | 50.00 | 60.00 |"
    assert lines[4] == "| Siamese (1 seed) | 1.00 | 2.00 | 3.00 |"  # one seed: no spread, but marked
    assert "sample standard deviation" in table.to_markdown()
    saved = json.load(open(write_table(table, str(tmp_path / "t"))[1], encoding="utf-8"))["rows"][0]
    assert saved["seeds"] == [1, 2, 3] and len(saved["per_seed"]) == 3


def test_a_metric_of_the_first_seeds_only_is_folded_over_them_and_marked(tmp_path):
    """An evaluation that scores each row's first seed (the fine-tuned tasks): its columns are that
    seed's numbers, shown and judged as one seed's beside the row's other columns."""
    ecd = write_results(make_results(tmp_path, "ECD", ((seed_row_name("M", 1), 10.0, 20.0, 30.0),
                                                       (seed_row_name("M", 2), 12.0, 22.0, 32.0))), str(tmp_path / "e"))
    jddc = write_results(make_results(tmp_path, "JDDC", ((seed_row_name("M", 1), 1.0, 2.0, 3.0),)),
                         str(tmp_path / "j"))
    table = aggregate_seeds(merge_results([ecd, jddc]))
    row = table.rows[0]
    assert row.seeds == [1, 2] and row.seeds_of("ECD", "corr") == [1, 2] and row.seeds_of("JDDC", "corr") == [1]
    assert row.metrics["JDDC"]["corr"] == 1.0 and "JDDC" not in row.spread
    assert "| M (2 seeds) | 11.00 ± 1.41 |" in table.to_markdown()
    assert "1.00 (1 of 2 seeds)" in table.to_markdown() and "its row's first seed's number" in table.to_markdown()
    assert table.to_dict()["rows"][0]["metric_seeds"] == {"JDDC": {"corr": [1], "map": [1], "mrr": [1]}}
    cell = cells(table.to_dict())[("M", "JDDC:corr")]
    assert cell.seeds == 1 and outcome(cell, dataclasses.replace(cell, value=0.5)) == GAP_ONLY
    assert "metric_seeds" not in aggregate_seeds(merge_results([ecd])).to_dict()["rows"][0]


def test_seed_folding_refuses_missing_or_repeated_seeds(tmp_path):
    ecd = write_results(make_results(tmp_path, "ECD", ((seed_row_name("M", 1), 1.0, 2.0, 3.0),
                                                       (seed_row_name("M", 2), 1.0, 2.0, 3.0))), str(tmp_path / "e"))
    jddc = write_results(make_results(tmp_path, "JDDC", ((seed_row_name("M", 2), 1.0, 2.0, 3.0),)),
                         str(tmp_path / "j"))
    with pytest.raises(ValueError, match=r"M: JDDC \w+ is reported by seeds \[2\] of \[1, 2\], neither all nor only"):
        aggregate_seeds(merge_results([ecd, jddc]))
    three = write_results(make_results(tmp_path, "ECD", tuple((seed_row_name("M", seed), 1.0, 2.0, 3.0)
                                                            for seed in (1, 2, 3))), str(tmp_path / "three"))
    two = write_results(make_results(tmp_path, "JDDC", tuple((seed_row_name("M", seed), 1.0, 2.0, 3.0)
                                                           for seed in (1, 2))), str(tmp_path / "two"))
    with pytest.raises(ValueError, match=r"reported by seeds \[1, 2\] of \[1, 2, 3\]"):
        aggregate_seeds(merge_results([three, two]))
    table = merge_results([ecd])
    table.rows[1].model = table.rows[0].model
    with pytest.raises(ValueError, match="seed listed twice"):
        aggregate_seeds(table)
    table = merge_results([ecd])
    table.rows[1].model = "M"
    with pytest.raises(ValueError, match=r"\['M'\]: a row without a seed and seed rows share this name"):
        aggregate_seeds(table)


def test_read_results_rejects_other_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"batch_size": 8}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a results.json"):
        read_results(str(path))
    path.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_results(str(path))
    with pytest.raises(ValueError, match="at least one"):
        merge_results([])


def test_portable_paths_are_relative_to_the_repository(tmp_path):
    assert portable_path(os.path.join(REPO_ROOT, "runs", "ecd", "encoder")) == os.path.join("runs", "ecd", "encoder")
    beside = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "sts.txt")
    assert portable_path(beside) == os.path.join("..", "shared", "data", "sts.txt")
    outside = portable_path(str(tmp_path / "select.txt"))
    assert not os.path.isabs(outside)
    assert os.path.normpath(os.path.join(REPO_ROOT, outside)) == str(tmp_path / "select.txt")
    # A relative path is taken from the working directory, as the command line meant it.
    assert portable_path("select.txt") == os.path.relpath(os.path.abspath("select.txt"), REPO_ROOT)


def test_dataset_file_record_names_the_task_file_its_checksum_and_size(tmp_path):
    path = tmp_path / "sts.txt"
    path.write_text("5\ta\tb\n", encoding="utf-8")
    record = dataset_file_record("sts", "sts_pairs", str(path), 1)
    assert record == {"sts_file": portable_path(str(path)), "sts_sha256": file_sha256(str(path)), "sts_pairs": 1}


def test_table_columns_follow_the_task_order_then_unknown_metrics():
    assert metric_columns()[:3] == (("corr", "Corr."), ("map", "MAP"), ("mrr", "MRR"))
    assert [key for key, _ in metric_columns()[3:]] == [
        "acc_1shot", "acc_1shot_std", "acc_5shot", "acc_5shot_std",
        *(f"oos_{k}shot_{m}" for k in (1, 5) for m in ("acc", "in_acc", "oos_acc", "oos_recall")),
        *(f"urs_r{k}" for k in (1, 3, 5, 10)), *(f"drs_{kind}r{k}" for kind in ("", "options_") for k in (1, 3, 5, 10)),
        "ft_acc_1shot", "ft_acc_1shot_std", "ft_acc_5shot", "ft_acc_5shot_std",
        *(f"da_{f1}_{k}shot{std}" for k in (10, 20) for f1 in ("micro_f1", "macro_f1") for std in ("", "_std")),
        "purity", "nmi", "ari", "spearman", "spearman_pairs", "dialogue_map", "dialogue_mrr"]
    rows = [{"ECD": {"mrr": 1.0, "corr": 2.0}}, {"ECD": {"map": 3.0, "recall": 4.0}, "JDDC": {"corr": 5.0}}]
    assert table_columns(["ECD", "JDDC", "MDC"], rows) == [
        ("ECD", "corr", "Corr."), ("ECD", "map", "MAP"), ("ECD", "mrr", "MRR"), ("ECD", "recall", "recall"),
        ("JDDC", "corr", "Corr."),
    ]


def test_no_two_metrics_share_a_header():
    # A dataset scored by SR and by dialogue retrieval (SGD dev) must not show two "MAP" columns.
    headers = [header for _, header in metric_columns()]
    assert len(headers) == len(set(headers))


def test_selected_columns_in_order_with_the_best_row_bold_and_a_chart(tmp_path):
    from dialoguecse_tf.evaluation.plotting import plot_table
    from dialoguecse_tf.evaluation.tables import select_columns

    models = ((seed_row_name("DSE", 1), 50.0, 60.0, 70.0), (seed_row_name("DSE", 2), 54.0, 58.0, 70.0),
              ("MiniLM", 52.0, 61.0, 71.0), ("Tie", 40.0, 61.0, 71.0))
    table = aggregate_seeds(merge_results([write_results(make_results(tmp_path, "ECD", models), str(tmp_path / "r"))]))
    chosen = select_columns(table, ["ECD:mrr", "ECD:corr"], mark_best=True)
    lines = chosen.to_markdown().splitlines()
    assert lines[0] == "| Model | ECD MRR | ECD Corr. |"
    assert lines[2] == "| DSE (2 seeds) | 70.00 ± 0.00 | **52.00 ± 2.83** |"
    assert lines[3] == "| MiniLM | **71.00** | **52.00** |"  # 52.0 ties DSE's mean: both bold
    assert _BEST_NOTE in chosen.to_markdown()
    assert chosen.best_rows() == {"ECD MRR": ["MiniLM", "Tie"], "ECD Corr.": ["DSE", "MiniLM"]}
    saved = json.load(open(write_table(chosen, str(tmp_path / "t"))[1], encoding="utf-8"))
    assert saved["columns"] == [["ECD", "mrr", "ECD MRR"], ["ECD", "corr", "ECD Corr."]]
    assert saved["best"]["ECD MRR"] == ["MiniLM", "Tie"]
    with pytest.raises(ValueError, match="column 'ECD:acc_1shot' is not in the table; it has ECD:corr"):
        select_columns(table, ["ECD:acc_1shot"])
    plot_table(chosen, str(tmp_path / "chart.png"))
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bold_marks_the_best_row_and_every_row_level_with_it_within_twice_the_larger_seed_std(tmp_path):
    from dialoguecse_tf.evaluation.tables import level, select_columns

    # ECD Corr.: "Wide" and "Close" 0.07 apart with stds near 3: level, both bold (the former rule
    # bolded "Wide" alone). ECD MAP: "Tight" 1.00 ahead of "Behind" with stds near 0.14: only "Tight".
    # ECD MRR: "Plain" (no seeds, std 0) 0.50 under "Wide" (std 0.30): level; "Low" 0.70 under: behind.
    seeds = {"Wide": ((40.0, 45.0, 71.0), (44.0, 45.0, 70.4), (46.0, 45.0, 70.7)),
             "Close": ((39.93, 44.0, 60.0), (43.93, 44.0, 60.0), (45.93, 44.0, 60.0)),
             "Tight": ((30.0, 50.1, 60.0), (30.0, 49.9, 60.0)),
             "Behind": ((30.0, 49.1, 60.0), (30.0, 48.9, 60.0))}
    models = [(seed_row_name(model, seed), *values) for model, runs in seeds.items()
              for seed, values in enumerate(runs, 1)]
    models += [("Plain", 20.0, 10.0, 70.2), ("Low", 20.0, 10.0, 70.0)]
    table = aggregate_seeds(merge_results([write_results(make_results(tmp_path, "ECD", models), str(tmp_path / "r"))]))
    chosen = select_columns(table, ["ECD:corr", "ECD:map", "ECD:mrr"], mark_best=True)
    spread = {row.model: row.spread.get("ECD", {}) for row in chosen.rows}
    assert 2.9 < spread["Close"]["corr"] < 3.1 and 0.1 < spread["Tight"]["map"] < 0.15
    assert chosen.best_rows() == {"ECD Corr.": ["Wide", "Close"], "ECD MAP": ["Tight"], "ECD MRR": ["Wide", "Plain"]}
    lines = chosen.to_markdown().splitlines()
    assert lines[2].startswith("| Wide (3 seeds) | **43.33 ± 3.06** | 45.00 ± 0.00 | **70.70 ± 0.30** |")
    assert lines[3].startswith("| Close (3 seeds) | **43.26 ± 3.06** | 44.00 ± 0.00 |")
    assert lines[4].startswith("| Tight (2 seeds) | 30.00 ± 0.00 | **50.00 ± 0.14** |")
    assert lines[5].startswith("| Behind (2 seeds) | 30.00 ± 0.00 | 49.00 ± 0.14 |")
    assert lines[6] == "| Plain | 20.00 | 10.00 | **70.20** |" and lines[7] == "| Low | 20.00 | 10.00 | 70.00 |"
    # The note says the rule exactly.
    assert ("and every row level with it; a row leads another only when their means differ by more than twice "
            "the larger of the two rows' seed standard deviations (a row without seeds counts 0)") in _BEST_NOTE
    # The boundary: a gap of exactly twice the larger std is level; a row without seeds ties only exactly.
    assert level(10.0, 0.5, 9.0, 0.25) and not level(10.0, 0.5, 8.99, 0.25) and level(10.0, 0.0, 10.0, 0.0)
    assert not level(10.0, 0.0, 9.99, 0.0)
    # A column one row alone fills (a part scored on the untouched row only) ranks nothing.
    alone = aggregate_seeds(merge_results([write_results(make_results(tmp_path, "JDDC", [("Plain", 1.0, 2.0, 3.0)]),
                                                         str(tmp_path / "alone"))]))
    assert select_columns(alone, ["JDDC:map"], mark_best=True).best_rows() == {}


def test_a_one_seed_row_beside_a_row_of_one_seed_or_none_is_bold_only_when_best_and_the_note_says_why(tmp_path):
    from dialoguecse_tf.evaluation.tables import _SINGLE_SEED_NOTE, select_columns

    # ECD Corr.: "Once" (one seed) 0.01 under "Plain" (no seeds): no spread to call them level by,
    # so Plain alone is bold. ECD MAP: "Once" 0.1 under "Three" (std 0.05): level by Three's spread.
    models = [(seed_row_name("Once", 1), 44.99, 50.0, 60.0), ("Plain", 45.0, 10.0, 60.0)]
    models += [(seed_row_name("Three", seed), 10.0, value, 60.0) for seed, value in ((1, 50.05), (2, 50.1), (3, 50.15))]
    table = aggregate_seeds(merge_results([write_results(make_results(tmp_path, "ECD", models), str(tmp_path / "r"))]))
    chosen = select_columns(table, ["ECD:corr", "ECD:map"], mark_best=True)
    assert chosen.best_rows() == {"ECD Corr.": ["Plain"], "ECD MAP": ["Once", "Three"]}
    assert _SINGLE_SEED_NOTE in chosen.to_markdown()
    without = select_columns(aggregate_seeds(merge_results([write_results(
        make_results(tmp_path, "JDDC", [("Plain", 1.0, 2.0, 3.0), ("Low", 0.5, 2.0, 3.0)]), str(tmp_path / "w"))])),
        ["JDDC:corr"], mark_best=True)
    assert without.best_rows() == {"JDDC Corr.": ["Plain"]} and _SINGLE_SEED_NOTE not in without.to_markdown()


def test_parts_merge_in_a_fixed_row_order_with_missing_columns_skipped_on_request(tmp_path):
    from dialoguecse_tf.evaluation.tables import order_rows, select_columns

    second = write_results(make_results(tmp_path, "ECD", (("DSE", 50.0, 60.0, 70.0),)), str(tmp_path / "b"))
    first = write_results(make_results(tmp_path, "ECD", (("Untouched", 40.0, 55.0, 65.0),
                                                         ("MLM", 45.0, 56.0, 66.0))), str(tmp_path / "a"))
    table = order_rows(merge_results([second, first]), ["Untouched", "MLM", "SiameseBERT_M", "DSE"])
    assert [row.model for row in table.rows] == ["Untouched", "MLM", "DSE"]
    assert [row.model for row in order_rows(table, ["DSE"]).rows] == ["DSE", "Untouched", "MLM"]
    kept = select_columns(table, ["ECD:map", "JDDC:map", "ECD:corr"], skip_missing=True)
    assert [header for _, _, header in kept.columns()] == ["ECD MAP", "ECD Corr."]
    with pytest.raises(ValueError, match="column 'JDDC:map' is not in the table"):
        select_columns(table, ["ECD:map", "JDDC:map"])


def test_absolute_paths_in_the_config_are_written_relative(tmp_path):
    config = {"checkpoint": [str(tmp_path / "ckpt"), "runs/x"], "output_dir": str(tmp_path / "out"), "batch_size": 8}
    saved = new_results(config, [])["config"]
    assert saved["checkpoint"] == [os.path.relpath(tmp_path / "ckpt", REPO_ROOT), "runs/x"]
    assert saved["output_dir"] == os.path.relpath(tmp_path / "out", REPO_ROOT) and saved["batch_size"] == 8


def test_the_table_lists_each_rows_dialogue_protocol_through_merging_and_seed_folding(tmp_path):
    results = make_results(tmp_path, models=((seed_row_name("dial2vec", 1), 1.0, 2.0, 3.0),
                                             (seed_row_name("dial2vec", 2), 1.5, 2.0, 3.0),
                                             ("MiniLM", 4.0, 5.0, 6.0), ("BERT-avg", 7.0, 8.0, 9.0)))
    for model, protocol in zip(results["models"], ("interlocutor", "interlocutor", "plain_mean", None)):
        model["dialogue_protocol"] = protocol
    table = aggregate_seeds(merge_results([write_results(results, str(tmp_path / "r"))]))
    assert [row.dialogue_protocols for row in table.rows] == [["interlocutor"], ["plain_mean"], []]
    # The note explains the protocols the rows use, and only those.
    assert ("each row's embedding protocol (interlocutor: dial2vec's interlocutor pooling; plain_mean: the mean of all "
            "token outputs of the dialogue without [SEP]): dial2vec (2 seeds): interlocutor; MiniLM: plain_mean."
            ) in table.to_markdown()
    # Results written before rows named their protocol: no protocol line.
    for model in results["models"]:
        del model["dialogue_protocol"]
    old = merge_results([write_results(results, str(tmp_path / "old"))])
    assert "embedding protocol" not in old.to_markdown()
    assert model_record("x", "c", None, "d", None, {})["dialogue_protocol"] is None


def test_the_evaluation_tasks_import_without_the_results_modules():
    # results_io and tables read the task registry; a task importing them back would be an import cycle.
    code = ("import sys; from dialoguecse_tf.evaluation.tasks.registry import task_classes; task_classes(); "
            "print(any(f'dialoguecse_tf.evaluation.{name}' in sys.modules for name in ('results_io', 'tables')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.stdout.strip().splitlines()[-1] == "False"
