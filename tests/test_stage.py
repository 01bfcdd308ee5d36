"""The one training stage: periodic evaluation keeps the best encoder by the primary metric."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import stage_runs
from stage_runs import assert_best_is_the_first_argmax
from dialoguecse_tf import precision, stage
from dialoguecse_tf.cli.train_flags import stage_from_args
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import CHECKPOINT_MARKER_FILE, RETIRED_SUFFIX, load_checkpoint, save_checkpoint
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.records.contrastive import ContrastiveRecordSpec, write_contrastive_records
from dialoguecse_tf.training.train_log import TRAIN_LOG_FILE, read_train_log


@pytest.fixture
def contrastive_run(tmp_path, tiny_vocab_file, tiny_bert_config):
    """Contrastive records and a 2-layer start checkpoint; returns the stage's settings (a
    4-step dialoguecse run, one layer frozen)."""
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=10)
    spec = ContrastiveRecordSpec(max_seq_length=10, num_context_turns=2, num_negatives=3,
                                 context_layout="sides")
    write_contrastive_records(stage_runs._dialogues(24, 5), tokenizer, str(tmp_path / "records"), spec,
                              random_seed=1)
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    # A seeded start: the scores' ranks change little on the small evaluation sets, and with an
    # unseeded start some draws scored every evaluation alike, which leaves the selection untested.
    keras.utils.set_random_seed(0)
    save_checkpoint(str(tmp_path / "init"), build_backbone(config), config, tokenizer)
    return dict(train_file=(str(tmp_path / "records" / "contrastive-*"),), output_dir=str(tmp_path / "run"),
                init_checkpoint=str(tmp_path / "init"), max_seq_length=10, num_context_turns=2, num_negatives=3,
                num_frozen_layers=1, aggregation="mean", train_batch_size=8, learning_rate=3e-3, num_train_steps=4,
                log_steps=1, save_checkpoints_steps=2, num_length_buckets=stage_runs.LENGTH_BUCKETS)


@pytest.mark.slow
def test_periodic_evaluation_keeps_the_best_encoder(tmp_path, contrastive_run):
    files = stage_runs.write_evaluation_files(tmp_path)
    seen = {}
    # The released variant's default aggregation, checkpointing at the end only.
    settings = {key: value for key, value in contrastive_run.items() if key not in ("aggregation",
                                                                                   "save_checkpoints_steps")}
    objective, train_config = stage.configure(
        "dialoguecse", **{**settings, "num_train_steps": 12, "eval_steps": 4, "eval_select_file": files["select"],
                          "eval_sts_file": files["sts"]})
    logs = stage.run_stage(objective, train_config, verbose=False,
                           on_log=lambda step, values: seen.setdefault(step, values))
    # Tasks run in table order (D-STS, then SR), so D-STS Corr. selects.
    best = load_checkpoint(str(tmp_path / "run" / stage.BEST_ENCODER_DIR), 10).metadata
    assert best["selected_by"] == "corr"
    assert_best_is_the_first_argmax(tmp_path / "run", "corr", best, (4, 8, 12))
    assert {"corr", "map", "mrr"} <= set(best["eval"])
    assert "eval_corr" in logs and "eval_map" in logs
    record = json.load(open(tmp_path / "run" / stage.CONFIG_FILE, encoding="utf-8"))
    assert record["objective"] == "dialoguecse" and record["options"]["variant"] == "released"
    assert os.path.isdir(tmp_path / "run" / stage.ENCODER_DIR)
    assert np.isfinite([values["loss"] for values in seen.values()]).all()


class _Killed(Exception):
    pass


@pytest.mark.slow
def test_a_resumed_run_keeps_the_encoder_kept_before_its_kill(tmp_path, contrastive_run):
    files = stage_runs.write_evaluation_files(tmp_path)
    settings = {**contrastive_run, "num_train_steps": 12, "eval_steps": 4, "eval_select_file": files["select"],
                "eval_sts_file": files["sts"]}

    def kill_after_the_second_evaluation(step, values):
        if step == 9:
            raise _Killed

    with pytest.raises(_Killed):
        stage.run_stage(*stage.configure("dialoguecse", **settings), verbose=False,
                        on_log=kill_after_the_second_evaluation)
    marker = tmp_path / "run" / stage.BEST_ENCODER_DIR / CHECKPOINT_MARKER_FILE
    kept = json.loads(marker.read_text(encoding="utf-8"))
    assert kept["step"] in (4, 8)
    # As if the kept encoder scored the highest Corr. there is: no later evaluation may replace it.
    kept["eval"]["corr"] = 100.0
    marker.write_text(json.dumps(kept), encoding="utf-8")
    stage.run_stage(*stage.configure("dialoguecse", **settings), verbose=False)
    scores = [entry["step"] for entry in read_train_log(str(tmp_path / "run" / TRAIN_LOG_FILE)) if "eval_corr" in entry]
    assert scores == [4, 8, 12]
    best = load_checkpoint(str(tmp_path / "run" / stage.BEST_ENCODER_DIR), 10).metadata
    assert (best["step"], best["eval"]["corr"]) == (kept["step"], 100.0)


@pytest.mark.slow
def test_periodic_evaluation_reads_an_evaluation_suite(tmp_path, contrastive_run):
    from dialoguecse_tf.evaluation.suite import SuiteEntry, write_suite

    files = stage_runs.write_evaluation_files(tmp_path)
    suite_file = str(tmp_path / "suite.json")
    write_suite(suite_file, [SuiteEntry("B", "sr", files["select"]), SuiteEntry("A", "dsts", files["sts"])])
    with pytest.raises(ValueError, match="either as eval_task/eval_suite or as eval_sts_file, not both"):
        stage.configure("dialoguecse", **contrastive_run, eval_suite=suite_file, eval_sts_file=files["sts"])
    objective, train_config = stage.configure("dialoguecse", **contrastive_run, eval_steps=2, eval_suite=suite_file)
    logs = stage.run_stage(objective, train_config, verbose=False)
    # Several datasets: metrics named dataset/metric, the first dataset's primary metric selects.
    best = load_checkpoint(str(tmp_path / "run" / stage.BEST_ENCODER_DIR), 10).metadata
    assert best["selected_by"] == "B/map" and set(best["eval"]) == {"B/map", "B/mrr", "A/corr"}
    assert {"eval_B/map", "eval_B/mrr", "eval_A/corr"} <= set(logs)


@pytest.mark.slow
def test_a_config_file_reruns_its_run_exactly(contrastive_run, tmp_path):
    stage.run_stage(*stage.configure("dialoguecse", **contrastive_run), verbose=False)
    config_file = os.path.join(contrastive_run["output_dir"], stage.CONFIG_FILE)
    stage.run_stage(*stage_from_args([f"--config_file={config_file}", f"--output_dir={tmp_path / 'rerun'}"]),
                    verbose=False)
    first = load_checkpoint(os.path.join(contrastive_run["output_dir"], stage.ENCODER_DIR), 10).backbone.get_weights()
    again = load_checkpoint(str(tmp_path / "rerun" / stage.ENCODER_DIR), 10).backbone.get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


@pytest.mark.slow
def test_a_run_resumes_only_with_the_settings_it_started_with(contrastive_run):
    run_dir = contrastive_run["output_dir"]
    logs = stage.run_stage(*stage.configure("dialoguecse", **contrastive_run), verbose=False)
    assert logs
    # Same settings (where and how often to log or checkpoint may change): nothing left to do.
    assert stage.run_stage(*stage.configure("dialoguecse", **{**contrastive_run, "log_steps": 2}),
                           verbose=False) == {}
    written = open(os.path.join(run_dir, stage.CONFIG_FILE), "rb").read()
    changed = {**contrastive_run, "learning_rate": 1e-3, "temperature": 0.05}
    with pytest.raises(ValueError) as error:
        stage.run_stage(*stage.configure("dialoguecse", **changed), verbose=False)
    message = str(error.value)
    assert "\n" not in message
    assert "learning_rate 0.003 -> 0.001" in message and "temperature 0.1 -> 0.05" in message
    assert "overwrite_output_dir" in message and "num_train_steps" not in message
    assert open(os.path.join(run_dir, stage.CONFIG_FILE), "rb").read() == written


@pytest.mark.slow
def test_overwrite_output_dir_trains_the_changed_settings_from_scratch(contrastive_run):
    run_dir = contrastive_run["output_dir"]
    stage.run_stage(*stage.configure("dialoguecse", **contrastive_run), verbose=False)
    # A best encoder a kill left retired belongs to the old settings: a resumed selection would put it back.
    os.makedirs(os.path.join(run_dir, stage.BEST_ENCODER_DIR + RETIRED_SUFFIX))
    changed = {**contrastive_run, "learning_rate": 1e-3, "num_train_steps": 2, "overwrite_output_dir": True}
    logs = stage.run_stage(*stage.configure("dialoguecse", **changed), verbose=False)
    assert not os.path.exists(os.path.join(run_dir, stage.BEST_ENCODER_DIR + RETIRED_SUFFIX))
    assert logs and logs["learning_rate"] < 1e-3
    assert json.load(open(os.path.join(run_dir, stage.CONFIG_FILE)))["learning_rate"] == 1e-3
    assert sorted(os.listdir(os.path.join(run_dir, "checkpoints"))) == [
        "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    assert [entry["step"] for entry in read_train_log(os.path.join(run_dir, TRAIN_LOG_FILE))] == [1, 2]
    assert load_checkpoint(os.path.join(run_dir, stage.ENCODER_DIR), 10).metadata["num_train_steps"] == 2


@pytest.mark.slow
def test_the_encoder_records_the_digest_of_its_config_json(contrastive_run):
    stage.run_stage(*stage.configure("dialoguecse", **contrastive_run), verbose=False)
    record = json.load(open(os.path.join(contrastive_run["output_dir"], stage.CONFIG_FILE)))
    metadata = load_checkpoint(os.path.join(contrastive_run["output_dir"], stage.ENCODER_DIR), 10).metadata
    assert metadata[stage.SETTINGS_DIGEST_KEY] == stage.settings_digest(record)
    # What an earlier version left: config.json rewritten with other settings over the old encoder.
    assert stage.settings_digest({**record, "learning_rate": 1e-3}) != metadata[stage.SETTINGS_DIGEST_KEY]


@pytest.mark.parametrize("objective_name, options", [
    ("siamese_m", {}), ("dialoguecse", {"aggregation": "attention"}), ("dialoguecse", {"aggregation": "mean"})])
def test_a_run_with_every_layer_frozen_is_refused_naming_the_half_to_freeze(contrastive_run, objective_name,
                                                                            options):
    settings = {**{key: value for key, value in contrastive_run.items() if key != "aggregation"},
                "num_frozen_layers": 2}
    # The tiny encoder has 2 layers; the papers' presets freeze 6 of 12.
    with pytest.raises(ValueError, match=r"every layer of this 2-layer encoder.*--num_frozen_layers=1 "):
        stage.run_stage(*stage.configure(objective_name, **settings, **options), verbose=False)
    assert not os.path.exists(contrastive_run["output_dir"])


def test_an_output_dir_that_is_a_file_is_refused_before_the_records_are_read(tmp_path):
    (tmp_path / "taken").write_text("a file")
    for output_dir in (tmp_path / "taken", tmp_path / "taken" / "run"):
        objective, config = stage.configure("mlm", train_file=(str(tmp_path / "no-records-*"),),
                                            output_dir=str(output_dir), num_train_steps=1)
        where = "" if output_dir == tmp_path / "taken" else f": {tmp_path / 'taken'}"
        with pytest.raises(NotADirectoryError, match=f"output_dir {output_dir}{where} is not a folder"):
            stage.run_stage(objective, config, verbose=False)
    assert (tmp_path / "taken").read_text() == "a file"


def test_a_bfloat16_run_writes_float32_checkpoints_that_load_in_any_precision(contrastive_run):
    objective, config = stage.configure("dialoguecse", **contrastive_run, precision="bfloat16")
    logs = stage.run_stage(objective, config, verbose=False)
    assert np.isfinite(logs["loss"])
    run_dir = contrastive_run["output_dir"]
    assert json.load(open(os.path.join(run_dir, stage.CONFIG_FILE)))["precision"] == "bfloat16"
    encoder_dir = os.path.join(run_dir, stage.ENCODER_DIR)
    # The written encoder and the resumable checkpoint hold float32 variables only (and the step).
    written = tf.train.load_checkpoint(os.path.join(encoder_dir, "bert_model.ckpt")).get_variable_to_dtype_map()
    assert set(written.values()) == {tf.float32}
    resumable = tf.train.load_checkpoint(os.path.join(run_dir, "checkpoints")).get_variable_to_dtype_map()
    assert {dtype for dtype in resumable.values() if dtype.is_floating} == {tf.float32}
    loaded = load_checkpoint(encoder_dir, 10)
    assert loaded.backbone.compute_dtype == "float32"
    half = load_checkpoint(encoder_dir, 10, precision="bfloat16").backbone
    assert half.compute_dtype == "bfloat16"
    for plain_weight, half_weight in zip(loaded.backbone.get_weights(), half.get_weights()):
        np.testing.assert_array_equal(plain_weight, half_weight)


def test_a_precision_the_cpu_would_emulate_is_refused_before_anything_is_built(contrastive_run, monkeypatch):
    monkeypatch.setattr(precision, "_first_gpu", lambda: None)
    monkeypatch.setattr(precision, "cpu_bfloat16_flags", lambda: ())
    objective, config = stage_from_args([f"--{name}={value}" for name, value in {
        "objective": "dialoguecse", "precision": "bfloat16", "train_file": contrastive_run["train_file"][0],
        "output_dir": contrastive_run["output_dir"], "init_checkpoint": contrastive_run["init_checkpoint"],
        "max_seq_length": 10}.items()])
    assert config.precision == "bfloat16"
    with pytest.raises(ValueError) as refused:
        stage.run_stage(objective, config, verbose=False)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith("precision bfloat16 needs a CPU with bfloat16 arithmetic (x86: avx512_bf16")
    assert not os.path.exists(contrastive_run["output_dir"])
    # float16 has no CPU to run on at all.
    with pytest.raises(ValueError, match="precision float16 needs a GPU"):
        stage.run_stage(*stage.configure("dialoguecse", **contrastive_run, precision="float16"), verbose=False)
