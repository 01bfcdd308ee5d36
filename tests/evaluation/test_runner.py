import json
import os

import numpy as np
import pytest

from conftest import REPO_ROOT, TINY_WORDS
from dialoguecse_tf.evaluation.config import EvaluationConfig
from dialoguecse_tf.evaluation.suite import SuiteEntry, write_suite
from dialoguecse_tf.evaluation.tasks.base import Evaluator
from forked_entry_points import run_python

RUN_EVALUATION = str(REPO_ROOT / "evaluation" / "run_evaluation.py")
MERGE_RESULTS = str(REPO_ROOT / "evaluation" / "merge_results.py")

SENTENCES = [
    "where is my order", "track my package please", "my package is late", "when ship my order",
    "i want a refund", "money back please", "refund my order", "i want money back",
    "change my address", "change the delivery address", "where is the invoice", "i want a discount code",
]


def run(script, *args):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return run_python([script, *args], text=True, env=env, cwd=REPO_ROOT)


@pytest.fixture
def tiny_setup(tmp_path, tiny_bert_config, tiny_vocab_file):
    """A random tiny project checkpoint, a 12-row select.txt, a 6-pair sts.txt, training text."""
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import save_checkpoint
    from dialoguecse_tf.encoder.tokenization import Tokenizer

    checkpoint = save_checkpoint(
        str(tmp_path / "tiny"), build_backbone(tiny_bert_config), tiny_bert_config, Tokenizer(tiny_vocab_file)
    )
    intents = [i // 4 for i in range(len(SENTENCES))]
    lines = []
    for i, sentence in enumerate(SENTENCES):
        positives = [j for j in range(len(SENTENCES)) if j != i and intents[j] == intents[i]]
        negatives = [j for j in range(len(SENTENCES)) if intents[j] != intents[i]][:5]
        ids = ",".join(map(str, positives)), ",".join(map(str, negatives))
        lines.append(f"{i}\t{sentence}\t{intents[i]}\t{ids[0]}\t{ids[1]}\n")
    (tmp_path / "select.txt").write_text("".join(lines), encoding="utf-8")
    pairs = [(5, 4, 5), (1, 0, 8), (4, 0, 1), (2, 9, 11), (3, 6, 7), (1, 3, 10)]
    (tmp_path / "sts.txt").write_text(
        "".join(f"{score}\t{SENTENCES[a]}\t{SENTENCES[b]}\n" for score, a, b in pairs), encoding="utf-8"
    )
    rng = np.random.default_rng(0)
    train = [" ".join(rng.choice(TINY_WORDS, size=rng.integers(2, 7))) for _ in range(60)]
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    return tmp_path, checkpoint


@pytest.mark.slow
def test_end_to_end_on_a_tiny_checkpoint(tiny_setup):
    from dialoguecse_tf.data.sr_builder import read_select_file
    from dialoguecse_tf.encoder.sentence import SentenceEncoder
    from dialoguecse_tf.evaluation.evaluate import evaluate_sr, evaluate_sts, sr_query_counts
    from dialoguecse_tf.evaluation.provenance import file_sha256
    from dialoguecse_tf.evaluation.sts import read_sts_file

    tmp_path, checkpoint = tiny_setup
    out = tmp_path / "eval"
    completed = run(
        RUN_EVALUATION, f"--checkpoint={checkpoint}", "--model_name=Tiny", "--baselines=avg,flow",
        f"--eval_task=TOY:sr:{tmp_path / 'select.txt'}", f"--eval_task=TOY:dsts:{tmp_path / 'sts.txt'}",
        f"--train_text_file={tmp_path / 'train.txt'}", "--flow_steps=3", "--flow_couplings=2",
        "--flow_hidden_units=8", "--max_seq_length=12", "--batch_size=8", f"--output_dir={out}",
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    # The same settings as config.json, with its absolute paths (tmp_path) relative to the repository.
    from dialoguecse_tf.evaluation.provenance import portable_values

    written = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert written["output_dir"] == str(out) and results["config"]["output_dir"] == os.path.relpath(out, REPO_ROOT)
    assert results["config"] == portable_values(written)
    assert results["config"]["baselines"] == ["avg", "flow"] and results["config"]["flow_steps"] == 3
    assert "created_utc" in results and "git_commit" in results
    # Each row's seconds, on record for a part's cost per encoder.
    assert list(results["model_seconds"]) == [model["display_name"] for model in results["models"]]
    assert all(seconds > 0 for seconds in results["model_seconds"].values())
    # Paths relative to the repository, checksums of the files read.
    assert results["datasets"][0] == {
        "name": "TOY",
        "select_file": os.path.relpath(tmp_path / "select.txt", REPO_ROOT),
        "select_sha256": file_sha256(str(tmp_path / "select.txt")),
        "sr_queries": 12,
        "sr_scored_queries": sr_query_counts(read_select_file(tmp_path / "select.txt"))["queries"],
        "sr_skipped_no_negative": sr_query_counts(read_select_file(tmp_path / "select.txt"))["skipped_no_negative"],
        "sr_queries_with_repeated_ids": 0,
        "sts_file": os.path.relpath(tmp_path / "sts.txt", REPO_ROOT),
        "sts_sha256": file_sha256(str(tmp_path / "sts.txt")),
        "sts_pairs": 6,
    }
    avg, flow = results["models"]
    assert (avg["display_name"], flow["display_name"]) == ("Tiny-avg", "Tiny-flow")
    assert avg["checkpoint"] == os.path.relpath(checkpoint, REPO_ROOT) and avg["baseline"] == "avg"
    assert flow["fit"]["steps"] == 3 and flow["fit"]["training_vectors"] == 60
    # The row's numbers are exactly what the library computes with `encode()`.
    encoder = SentenceEncoder.from_checkpoint(checkpoint, max_seq_length=12)
    expected_sr = evaluate_sr(encoder.encode, read_select_file(tmp_path / "select.txt"))
    expected_sts = evaluate_sts(encoder.encode, read_sts_file(tmp_path / "sts.txt"))
    assert avg["metrics"]["TOY"] == pytest.approx(
        {"corr": expected_sts["corr"], "map": expected_sr["map"], "mrr": expected_sr["mrr"]}, abs=1e-6
    )
    for value in flow["metrics"]["TOY"].values():
        assert -100 <= value <= 100
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert markdown.startswith("| Model | TOY Corr. | TOY MAP | TOY MRR |\n") and "| Tiny-flow |" in markdown

    merged = run(MERGE_RESULTS, f"--results={out / 'results.json'}", f"--output_dir={tmp_path / 'merged'}")
    assert merged.returncode == 0, merged.stderr
    assert (tmp_path / "merged" / "merged_results.md").read_text(encoding="utf-8") == markdown


def test_missing_required_flags_fail_with_a_clear_message(tmp_path):
    completed = run(RUN_EVALUATION, f"--select_file={tmp_path / 'select.txt'}", f"--output_dir={tmp_path}")
    assert completed.returncode != 0 and "--checkpoint must have a value" in completed.stderr
    completed = run(RUN_EVALUATION, f"--checkpoint={tmp_path}", f"--output_dir={tmp_path}")
    assert completed.returncode != 0
    assert "give at least one eval_task (DATASET:TASK:PATH), an eval_suite, or the per-dataset flags" in completed.stderr
    completed = run(MERGE_RESULTS, f"--output_dir={tmp_path}")
    assert completed.returncode != 0 and "--results must have a value" in completed.stderr


def test_nonexistent_files_fail_before_any_model_loads(tmp_path):
    (tmp_path / "sts.txt").write_text("5\ta\tb\n", encoding="utf-8")
    missing = tmp_path / "nope" / "select.txt"
    completed = run(
        RUN_EVALUATION, f"--checkpoint={tmp_path}", f"--select_file={missing}",
        f"--sts_file={tmp_path / 'sts.txt'}", f"--output_dir={tmp_path / 'out'}",
    )
    assert completed.returncode == 1
    assert f"sr file of dataset 'dev' not found: {missing}" in completed.stderr
    completed = run(
        RUN_EVALUATION, f"--checkpoint={tmp_path / 'no_checkpoint'}", f"--sts_file={tmp_path / 'sts.txt'}",
        f"--output_dir={tmp_path / 'out'}",
    )
    assert completed.returncode == 1 and f"checkpoint not found: {tmp_path / 'no_checkpoint'}" in completed.stderr
    assert not (tmp_path / "out").exists()


def test_read_train_texts(tmp_path, shared_data):
    from dialoguecse_tf.evaluation.runner import read_train_texts

    path = tmp_path / "train.txt"
    path.write_text("好的\nwhere is my order\n\n  \n好的\r\nrefund\n", encoding="utf-8")
    assert read_train_texts(str(path)) == ["好的", "where is my order", "refund"]
    path.write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no training sentence"):
        read_train_texts(str(path))
    sample = read_train_texts(str(shared_data / "ecd" / "train" / "train_data.txt.sample"), "authors")
    assert len(sample) == len(set(sample)) > 10000
    sgd = shared_data / "sgd" / "train"
    one, two = (read_train_texts(str(sgd / name), "sgd") for name in ("dialogues_001.json", "dialogues_002.json"))
    both = read_train_texts(str(sgd / "dialogues_00[12].json"), "sgd")
    assert both == list(dict.fromkeys(one + two)) and len(both) > len(one)
    with pytest.raises(FileNotFoundError, match="matches no file"):
        read_train_texts(str(sgd / "nothing_*.json"), "sgd")


def test_training_texts_may_be_a_glob_or_a_folder_for_corpus_formats(tmp_path, shared_data):
    select = tmp_path / "select.txt"
    select.write_text("0\ta\t\t1\t\n", encoding="utf-8")

    def config(path, text_format):
        return EvaluationConfig(checkpoint=(str(tmp_path),), output_dir="out", select_file=(str(select),),
                                baselines=("whitening",), train_text_file=str(path), train_text_format=text_format)

    sgd = shared_data / "sgd" / "train"
    config(sgd / "dialogues_00[12].json", "sgd").check_files()
    config(sgd, "sgd").check_files()
    for path, text_format in ((sgd / "nothing_*.json", "sgd"), (sgd, "lines"), (sgd, "jsonl")):
        with pytest.raises(FileNotFoundError, match="train_text_file not found"):
            config(path, text_format).check_files()


def test_config_suite_from_parallel_lists_or_entries(tmp_path):
    config = EvaluationConfig(
        checkpoint=("a/bert",), output_dir="out", dataset_name=("ECD", "JDDC"),
        select_file=("e/select.txt", ""), sts_file=("e/sts.txt", "j/sts.txt"), dialogue_file=("", "j/sgd"),
    )
    assert config.entries() == [
        SuiteEntry("ECD", "dsts", "e/sts.txt"), SuiteEntry("ECD", "sr", "e/select.txt"),
        SuiteEntry("JDDC", "dsts", "j/sts.txt"), SuiteEntry("JDDC", "clustering", "j/sgd"),
        SuiteEntry("JDDC", "relatedness", "j/sgd"), SuiteEntry("JDDC", "dialogue_retrieval", "j/sgd"),
    ]
    assert config.model_name == ("bert",)
    single = EvaluationConfig(checkpoint=("a",), output_dir="out", sts_file=("s.txt",))
    assert single.entries() == [SuiteEntry("dev", "dsts", "s.txt")]
    tasks = EvaluationConfig(checkpoint=("a",), output_dir="out", eval_task=("ECD:sr:e/select.txt", "ECD:dsts:e:s"))
    assert tasks.entries() == [SuiteEntry("ECD", "sr", "e/select.txt"), SuiteEntry("ECD", "dsts", "e:s")]


def test_build_suite_reads_every_dataset_in_task_order(tiny_setup):
    from dialoguecse_tf.evaluation.runner import build_suite
    from dialoguecse_tf.evaluation.tasks.dsts import DStsEvaluator
    from dialoguecse_tf.evaluation.tasks.sr import SrEvaluator

    tmp_path, _ = tiny_setup
    select, sts = str(tmp_path / "select.txt"), str(tmp_path / "sts.txt")
    config = EvaluationConfig(checkpoint=("ckpt",), output_dir="out", dataset_name=("A", "B"),
                              select_file=(select, ""), sts_file=(sts, sts))
    suite = build_suite(config)
    assert [dataset.name for dataset in suite.datasets] == ["A", "B"]
    # D-STS first, as Table 2's columns; a dataset without a file has no evaluator for it.
    assert [type(e) for e in suite.datasets[0].evaluators] == [DStsEvaluator, SrEvaluator]
    assert [type(e) for e in suite.datasets[1].evaluators] == [DStsEvaluator]
    assert [dataset.record()["name"] for dataset in suite.datasets] == ["A", "B"]
    assert "select_file" not in suite.datasets[1].record() and suite.datasets[1].record()["sts_pairs"] == 6


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"dataset_name": ("ECD", "JDDC")}, "2 datasets but 1 select_file values"),
        ({"select_file": ("a", "b")}, "2 datasets: name each with dataset_name"),
        ({"dataset_name": ("ECD", "ECD"), "select_file": ("a", "b")}, "distinct"),
        ({"select_file": ("",)}, r"dataset 'dev' has no evaluation file \(none of sts_file, select_file, intent_file, oos_file, dialogue_file\)"),
        ({"select_file": ()}, r"give at least one eval_task \(DATASET:TASK:PATH\), an eval_suite, or the "
                              r"per-dataset flags \(sts_file, select_file"),
        ({"eval_task": ("ECD:sr:select.txt",)}, r"either as eval_task/eval_suite or as the per-dataset flags "
                                                r"\(select_file\), not both"),
        ({"select_file": (), "eval_task": ("ECD:select:select.txt",)}, "unknown evaluation task 'select'; known "
                                                                        "tasks: dsts, sr, intent"),
        ({"select_file": (), "eval_task": ("ECD:sr:a", "ECD:sr:b")}, "lists task 'sr' of dataset 'ECD' twice"),
        ({"baselines": ("glove",)}, "unknown baseline 'glove'"),
        ({"baselines": ("flow",)}, "give train_text_file"),
        ({"model_name": ("A", "B")}, "one model_name per checkpoint"),
        ({"checkpoint": ("x", "y"), "model_name": ("A", "A")}, r"named \['A'\]"),
        ({"pooling": "max"}, "pooling must be one of"),
        ({"flow_steps": 0}, "flow steps must be a positive integer"),
    ],
)
def test_config_rejects_inconsistent_settings(overrides, message):
    settings = {"checkpoint": ("ckpt",), "output_dir": "out", "select_file": ("select.txt",), **overrides}
    with pytest.raises(ValueError, match=message):
        EvaluationConfig(**settings)


def test_a_suite_gives_the_results_of_the_flags_it_replaces(tiny_setup, caplog):
    """The same datasets as per-dataset flags and as a suite file (entries in another order):
    equal metrics, dataset records and tables; each row's metrics logged."""
    import logging as std_logging

    from dialoguecse_tf.evaluation.runner import run_evaluation

    tmp_path, checkpoint = tiny_setup
    select, sts = str(tmp_path / "select.txt"), str(tmp_path / "sts.txt")
    settings = {"checkpoint": (checkpoint,), "model_name": ("Tiny",), "max_seq_length": 12, "batch_size": 8}
    legacy = EvaluationConfig(**settings, output_dir=str(tmp_path / "legacy"), dataset_name=("ECD", "JDDC"),
                              select_file=(select, ""), sts_file=(sts, sts))
    suite_file = str(tmp_path / "suite.json")
    write_suite(suite_file, [SuiteEntry("ECD", "sr", select), SuiteEntry("JDDC", "dsts", sts),
                             SuiteEntry("ECD", "dsts", sts)])
    suite = EvaluationConfig(**settings, output_dir=str(tmp_path / "suite"), eval_suite=suite_file)
    assert suite.entries() == [SuiteEntry("ECD", "sr", select), SuiteEntry("JDDC", "dsts", sts),
                               SuiteEntry("ECD", "dsts", sts)]
    with caplog.at_level(std_logging.INFO, logger="absl"):
        by_flags, by_suite = (run_evaluation(config) for config in (legacy, suite))
    rows = [record.getMessage() for record in caplog.records if record.getMessage().startswith("Tiny (")]
    assert len(rows) == 2 and "ECD: corr " in rows[0] and "JDDC: corr " in rows[0]
    assert by_suite["datasets"] == by_flags["datasets"]
    assert [row["metrics"] for row in by_suite["models"]] == [row["metrics"] for row in by_flags["models"]]
    assert list(by_suite["models"][0]["metrics"]["ECD"]) == ["corr", "map", "mrr"]
    assert (tmp_path / "suite" / "results.md").read_text(encoding="utf-8") == \
        (tmp_path / "legacy" / "results.md").read_text(encoding="utf-8")


def test_the_unknown_share_of_a_checkpoints_evaluation_texts_is_reported_once(tiny_vocab_file, caplog):
    import logging as std_logging

    from dialoguecse_tf.encoder.tokenization import Tokenizer
    from dialoguecse_tf.evaluation.runner import _UnknownCounter

    tokenizer = Tokenizer(tiny_vocab_file)
    counter = _UnknownCounter(tokenizer)
    embed = counter.wrap(lambda texts: [len(text) for text in texts])
    assert embed(["where is my order", "zebra quantum"]) == [17, 13]
    embed(["zebra quantum", "refund please"])  # a text seen before is not counted again
    expected = tokenizer.count_unknown(["where is my order", "zebra quantum", "refund please"])
    assert (counter.unknown, counter.pieces) == expected and expected[0] > 0
    with caplog.at_level(std_logging.INFO, logger="absl"):
        counter.report("row A")
        counter.report("row B")
    lines = [r.getMessage() for r in caplog.records if "[UNK]" in r.getMessage()]
    assert len(lines) == 2  # the share (info) and, above 5 %, its warning, for the first row only
    assert all("the evaluation texts of row A" in line and tiny_vocab_file in line for line in lines)


class _PairCosine(Evaluator):
    """A task as a new module would define it: the mean cosine of the two sentences of each line
    of a tab-separated file."""

    name = "pair_cosine"
    task = "pair_cosine"
    label = "Pair cosine"
    count_key = "pair_cosine_pairs"
    description = "mean cosine of each line's two sentences"
    metrics = (("mean_pair_cosine", "Pair cos."),)
    primary_metric = "mean_pair_cosine"

    @staticmethod
    def read(path):
        with open(path, encoding="utf-8") as lines:
            return [tuple(line.rstrip("\n").split("\t")) for line in lines if line.strip()]

    @property
    def size(self):
        return len(self.data)

    def __call__(self, encode):
        return {"mean_pair_cosine": 100.0 * _mean_pair_cosine(encode, self.data)}


def _mean_pair_cosine(encode, pairs) -> float:
    first, second = (np.asarray(encode([pair[side] for pair in pairs]), np.float64) for side in (0, 1))
    cosines = np.sum(first * second, axis=1) / np.linalg.norm(first, axis=1) / np.linalg.norm(second, axis=1)
    return float(np.mean(cosines))


def test_a_new_task_is_its_module_and_one_registry_line(tiny_setup, monkeypatch):
    from dialoguecse_tf.encoder.sentence import SentenceEncoder
    from dialoguecse_tf.evaluation.runner import run_evaluation
    from dialoguecse_tf.evaluation.tasks import base
    from dialoguecse_tf.evaluation.tasks.registry import metric_columns, task_names

    monkeypatch.setattr(base, "TASKS", dict(base.TASKS))
    base.register_task(_PairCosine)
    assert task_names()[-1] == "pair_cosine" and metric_columns()[-1] == ("mean_pair_cosine", "Pair cos.")
    tmp_path, checkpoint = tiny_setup
    pairs = [(SENTENCES[a], SENTENCES[b]) for a, b in ((0, 1), (4, 6), (8, 9), (2, 10))]
    pair_file = tmp_path / "pairs.tsv"
    pair_file.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    config = EvaluationConfig(checkpoint=(checkpoint,), model_name=("Tiny",), max_seq_length=12, batch_size=8,
                              output_dir=str(tmp_path / "out"),
                              eval_task=(f"TOY:sr:{tmp_path / 'select.txt'}", f"TOY:pair_cosine:{pair_file}"))
    results = run_evaluation(config)
    metrics = results["models"][0]["metrics"]["TOY"]
    expected = 100.0 * _mean_pair_cosine(SentenceEncoder.from_checkpoint(checkpoint, max_seq_length=12).encode, pairs)
    assert list(metrics) == ["map", "mrr", "mean_pair_cosine"]
    assert metrics["mean_pair_cosine"] == pytest.approx(expected, abs=1e-4)
    assert results["datasets"][0]["pair_cosine_pairs"] == 4
    assert "Pair cos." in (tmp_path / "out" / "results.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_fine_tuned_tasks_are_refused_in_float16_before_any_model_loads(tiny_setup, monkeypatch):
    """float16 gradients need loss scaling, which the fine-tuning's AdamW (the release's) lacks."""
    from dialoguecse_tf.evaluation import runner

    tmp_path, checkpoint = tiny_setup
    (tmp_path / "intents").mkdir()
    items = [[sentence, str(i // 4)] for i, sentence in enumerate(SENTENCES)]
    for name in ("train.json", "test.json"):
        (tmp_path / "intents" / name).write_text(json.dumps(items), encoding="utf-8")
    # As on a GPU, where float16 passes the machine's check.
    monkeypatch.setattr(runner, "check_precision", lambda precision: None)
    config = EvaluationConfig(checkpoint=(checkpoint,), model_name=("Tiny",), max_seq_length=12,
                              output_dir=str(tmp_path / "out"), eval_task=(f"TOY:intent_ft:{tmp_path / 'intents'}",),
                              precision="float16")
    with pytest.raises(ValueError, match=r"^precision float16 cannot fine-tune \(TOY: Intent \(fine-tuned\)\): its "
                                         r"optimizer does no loss scaling; use float32 or bfloat16$"):
        runner.run_evaluation(config)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_fine_tuned_tasks_train_checkpoint_rows_and_do_not_apply_to_baseline_rows(tiny_setup, monkeypatch):
    from dialoguecse_tf.evaluation.runner import run_evaluation
    from dialoguecse_tf.evaluation.tasks.finetune_base import FineTuneSettings
    from dialoguecse_tf.evaluation.tasks.intent_finetune import IntentFineTuneEvaluator

    tmp_path, checkpoint = tiny_setup
    items = [[sentence, str(i // 4)] for i, sentence in enumerate(SENTENCES)]
    (tmp_path / "intents").mkdir()
    for name in ("train.json", "test.json"):
        (tmp_path / "intents" / name).write_text(json.dumps(items), encoding="utf-8")
    monkeypatch.setitem(IntentFineTuneEvaluator.presets, "cpu", FineTuneSettings(
        learning_rate=1e-3, batch_size=4, max_epochs=2, eval_steps=1, max_seq_length=12, num_runs=2))
    tasks = (f"TOY:sr:{tmp_path / 'select.txt'}", f"TOY:intent_ft:{tmp_path / 'intents'}")
    rows = []
    for name, baselines in (("checkpoint", ()), ("baselines", ("avg", "cls"))):
        config = EvaluationConfig(checkpoint=(checkpoint,), model_name=("Tiny",), max_seq_length=12, batch_size=8,
                                  output_dir=str(tmp_path / name), eval_task=tasks, baselines=baselines,
                                  finetune_preset="cpu")
        rows += run_evaluation(config)["models"]
    tiny, avg, cls = rows
    assert list(tiny["metrics"]["TOY"]) == ["map", "mrr", "ft_acc_1shot", "ft_acc_1shot_std", "ft_acc_5shot",
                                            "ft_acc_5shot_std"]
    assert "not_applicable" not in tiny
    for row in (avg, cls):
        assert list(row["metrics"]["TOY"]) == ["map", "mrr"]
        assert row["not_applicable"] == {"TOY": ["Intent (fine-tuned)"]}
        assert "TOY Intent (fine-tuned): not applicable (a baseline row has no encoder of its own" in row["description"]
    # The sentence columns are untouched by the fine-tuning: the checkpoint row's SR equals its avg baseline's.
    assert tiny["metrics"]["TOY"]["map"] == avg["metrics"]["TOY"]["map"]
    table = (tmp_path / "baselines" / "results.md").read_text(encoding="utf-8")
    assert "not applicable" in table
