"""The same command with the same seed gives the same numbers, dropout on, on CPU.

Each command runs twice side by side into two output folders; the per-step losses (logged
every step to TensorBoard), the evaluation metrics and the final weights must be equal
bit for bit, not merely close.
"""

import pytest
import json

import numpy as np

import stage_runs
from dialoguecse_tf.encoder.checkpoints import find_tf1_checkpoint, read_tf1_variables
from dialoguecse_tf.evaluation.provenance import portable_path

# Runs the entry points as subprocesses (CI runs them; deselect with -m "not slow").
pytestmark = pytest.mark.slow

NUM_TRAIN_STEPS = 20


def run_twice(script, flags, tmp_path) -> list:
    folders = [tmp_path / "first", tmp_path / "second"]
    stage_runs.run_together(
        {folder.name: stage_runs.command(script, *flags, f"--output_dir={folder}") for folder in folders}, tmp_path
    )
    return folders


def assert_same_training(folders, tags) -> None:
    """Both runs trained with dropout, logged every step, and agree on `tags` and the weights."""
    config = json.loads((folders[0] / "encoder" / "bert_config.json").read_text(encoding="utf-8"))
    assert config["hidden_dropout_prob"] == config["attention_probs_dropout_prob"] == stage_runs.DROPOUT
    assert sorted(stage_runs.scalars(folders[0], "loss")) == list(range(1, NUM_TRAIN_STEPS + 1))
    for tag in tags:
        first, second = (stage_runs.scalars(folder, tag) for folder in folders)
        assert first == second, tag
    weights = [read_tf1_variables(find_tf1_checkpoint(str(folder / "encoder"))) for folder in folders]
    assert sorted(weights[0]) == sorted(weights[1])
    for name, value in weights[0].items():
        np.testing.assert_array_equal(value, weights[1][name], err_msg=name)


def test_pretraining_is_deterministic(tmp_path, tiny_vocab_file, tiny_bert_config):
    flags = stage_runs.write_pretraining_inputs(tmp_path, tiny_vocab_file, tiny_bert_config)
    folders = run_twice(stage_runs.PRETRAIN, [*flags, f"--num_train_steps={NUM_TRAIN_STEPS}", "--log_steps=1"],
                        tmp_path)
    assert_same_training(folders, ["loss", "mlm_accuracy"])


def test_finetuning_and_evaluation_are_deterministic(tmp_path, tiny_vocab_file, tiny_bert_config):
    flags = stage_runs.write_finetuning_inputs(tmp_path, tiny_vocab_file, tiny_bert_config)
    files = stage_runs.write_evaluation_files(tmp_path)
    # Through the generic entry point (the same stage as finetune/run_finetuning.py), with the
    # paper-text variant: test_crash_safety.py runs the released one.
    folders = run_twice(
        stage_runs.TRAIN,
        [*flags, "--variant=paper_text", f"--num_train_steps={NUM_TRAIN_STEPS}", "--log_steps=1", "--eval_steps=10",
         f"--eval_select_file={files['select']}", f"--eval_sts_file={files['sts']}"],
        tmp_path,
    )
    assert sorted(stage_runs.scalars(folders[0], "eval/map")) == [10, NUM_TRAIN_STEPS]
    assert_same_training(folders, ["loss", "positive_ranked_first", "positive_cosine", "negative_cosine", "cosine_gap",
                                   "eval/map", "eval/mrr", "eval/corr"])
    # The encoder kept as the best by the evaluation is the same one too.
    best = [read_tf1_variables(find_tf1_checkpoint(str(folder / "best_encoder"))) for folder in folders]
    assert sorted(best[0]) == sorted(best[1])
    for name, value in best[0].items():
        np.testing.assert_array_equal(value, best[1][name], err_msg=name)

    encoder = folders[0] / "encoder"
    evaluations = [tmp_path / "eval_first", tmp_path / "eval_second"]
    common = [f"--checkpoint={encoder}", "--model_name=Tiny", "--baselines=avg,whitening,flow",
              f"--select_file={files['select']}", f"--sts_file={files['sts']}", f"--train_text_file={files['train']}",
              "--flow_steps=20", "--flow_couplings=2", "--flow_hidden_units=8", "--flow_batch_size=8",
              f"--max_seq_length={stage_runs.MAX_SEQ_LENGTH}", "--batch_size=8"]
    stage_runs.run_together(
        {folder.name: stage_runs.command(stage_runs.RUN_EVALUATION, *common, f"--output_dir={folder}")
         for folder in evaluations},
        tmp_path,
    )
    results = [json.loads((folder / "results.json").read_text(encoding="utf-8")) for folder in evaluations]
    for result, folder in zip(results, evaluations):
        # The only fields that may differ: when, how long, and where to.
        del result["created_utc"], result["model_seconds"]
        assert result["config"].pop("output_dir") == portable_path(str(folder))
    assert [model["display_name"] for model in results[0]["models"]] == ["Tiny-avg", "Tiny-whitening", "Tiny-flow"]
    assert results[0] == results[1]
