import dataclasses
import json
import os

import numpy as np
import pytest

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import load_checkpoint, save_checkpoint
from dialoguecse_tf.models.mlm import BertPretrainer
from dialoguecse_tf.records.mlm import (INPUT_IDS, INPUT_MASK, MASKED_LM_POSITIONS, SEGMENT_IDS, MlmRecordSpec,
                                        write_mlm_records)
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.stage import ENCODER_DIR, configure, run_stage
from hf_folders import write_hf_folder
from numpy_bert import bert_forward, layer_norm, gelu, random_bert_weights

SENTENCES = [
    "where is my order", "i want a refund please", "change my address", "track my package",
    "hello thanks", "my order is late", "discount code please", "ship to my new address",
]


@pytest.fixture
def mlm_setup(tmp_path, tiny_vocab_file, tiny_bert_config):
    """(the mlm objective, its TrainConfig) on tiny MLM records, from a dropout-free random init."""
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=16)
    rng = np.random.default_rng(0)
    dialogues = [
        Dialogue(str(i), tuple(Turn(str(j % 2), SENTENCES[rng.integers(len(SENTENCES))]) for j in range(6)))
        for i in range(60)
    ]
    spec = MlmRecordSpec(max_seq_length=16, max_predictions_per_seq=3)
    write_mlm_records(dialogues, tokenizer, str(tmp_path / "records"), spec, random_seed=3)
    config_file = tmp_path / "bert_config.json"
    tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).to_json_file(str(config_file))
    return configure(
        "mlm", train_file=[str(tmp_path / "records" / "mlm-*")], output_dir=str(tmp_path / "run"),
        bert_config_file=str(config_file), vocab_file=tiny_vocab_file, max_seq_length=16,
        max_predictions_per_seq=3, train_batch_size=8, learning_rate=2e-3, num_train_steps=40,
        num_warmup_steps=4, save_checkpoints_steps=10, log_steps=1,
    )


def test_mlm_head_is_tied_and_matches_numpy(tiny_bert_config):
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0)
    weights = random_bert_weights(config, seed=2, with_mlm_head=True)
    model = BertPretrainer(build_backbone(config), config)
    from dialoguecse_tf.encoder.checkpoints import assign_bert_variables

    assign_bert_variables(model.backbone, weights, "test")
    model.assign_head(weights, "test")
    assert not any("output_kernel" in v.path for v in model.weights)
    ids = np.array([[2, 7, 4, 9, 3, 0]], np.int32)
    mask = (ids > 0).astype(np.int32)
    positions = np.array([[2, 1]], np.int32)
    logits = model({INPUT_IDS: ids, INPUT_MASK: mask, SEGMENT_IDS: np.zeros_like(ids),
                    MASKED_LM_POSITIONS: positions}).numpy()
    sequence, _ = bert_forward(weights, config, ids, mask)
    x = sequence[0, positions[0]]
    x = gelu(x @ weights["cls/predictions/transform/dense/kernel"] + weights["cls/predictions/transform/dense/bias"], True)
    x = layer_norm(x, weights["cls/predictions/transform/LayerNorm/gamma"],
                   weights["cls/predictions/transform/LayerNorm/beta"], config.layer_norm_eps)
    expected = x @ weights["bert/embeddings/word_embeddings"].T + weights["cls/predictions/output_bias"]
    assert np.abs(logits[0] - expected).max() < 1e-4


@pytest.mark.slow
def test_loss_falls_and_encoder_is_saved(mlm_setup):
    objective, config = mlm_setup
    losses = []
    run_stage(objective, config, verbose=False, on_log=lambda step, logs: losses.append(logs["loss"]))
    assert len(losses) == 40
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    encoder_dir = os.path.join(config.output_dir, ENCODER_DIR)
    loaded = load_checkpoint(encoder_dir, max_seq_length=16)
    assert loaded.metadata["stage"] == "pretrain" and len(loaded.mlm_head) == 5
    assert loaded.metadata["objective"] == "mlm" and loaded.metadata["num_train_steps"] == 40
    written = json.loads(open(os.path.join(config.output_dir, "config.json"), encoding="utf-8").read())
    assert written["objective"] == "mlm" and written["options"] == {"max_predictions_per_seq": 3, "head_only": False}
    assert written["train_file"] == list(config.train_file) and written["train_batch_size"] == 8
    assert os.listdir(os.path.join(config.output_dir, "tensorboard"))
    # Continued pretraining from the stage's own output reloads its MLM head.
    again = dataclasses.replace(config, init_checkpoint=encoder_dir, bert_config_file=None,
                                output_dir=config.output_dir + "-continued", num_train_steps=2)
    run_stage(objective, again, verbose=False)


def test_saved_encoder_gives_in_memory_outputs(tmp_path, tiny_bert_config, tiny_vocab_file):
    model = BertPretrainer(build_backbone(tiny_bert_config), tiny_bert_config)
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    save_checkpoint(str(tmp_path / "enc"), model.backbone, tiny_bert_config, tokenizer, mlm_head=model.head_variables())
    loaded = load_checkpoint(str(tmp_path / "enc"), max_seq_length=12)
    restored = BertPretrainer(build_backbone(loaded.config), loaded.config)
    restored.backbone.set_weights(loaded.backbone.get_weights())
    restored.assign_head(loaded.mlm_head, "test")
    inputs = tokenizer(["where is my order", "refund"])
    batch = {INPUT_IDS: inputs["token_ids"], INPUT_MASK: inputs["padding_mask"],
             SEGMENT_IDS: inputs["segment_ids"], MASKED_LM_POSITIONS: np.array([[1, 2], [1, 1]], np.int32)}
    np.testing.assert_allclose(restored(batch).numpy(), model(batch).numpy(), atol=1e-6)


@pytest.mark.slow
def test_checkpoint_without_mlm_head_gets_a_fresh_one(mlm_setup, tmp_path, caplog, tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=4)
    folder = write_hf_folder(tmp_path / "hf", weights, tiny_bert_config, tiny_vocab_file)
    objective, setup = mlm_setup
    config = dataclasses.replace(setup, init_checkpoint=str(folder), bert_config_file=None, vocab_file=None,
                                 output_dir=str(tmp_path / "from_hf"), num_train_steps=2)
    run_stage(objective, config, verbose=False)
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert f"{folder} has no MLM head: a fresh one is initialised" in warnings, warnings
    assert len(load_checkpoint(str(tmp_path / "from_hf" / "encoder"), 16).mlm_head) == 5


@pytest.mark.slow
def test_head_only_warms_a_fresh_head_and_leaves_the_encoder_as_it_started(mlm_setup, tmp_path, tiny_bert_config,
                                                                          tiny_vocab_file):
    """A start without an MLM head (a sentence-embedding model): the head trains alone first, and
    continued pretraining then starts from that head."""
    folder = write_hf_folder(tmp_path / "hf", random_bert_weights(tiny_bert_config, seed=4), tiny_bert_config,
                             tiny_vocab_file)
    objective, setup = mlm_setup
    head_only = type(objective)(dataclasses.replace(objective.options, head_only=True))
    config = dataclasses.replace(setup, init_checkpoint=str(folder), bert_config_file=None, vocab_file=None,
                                 output_dir=str(tmp_path / "head"), num_train_steps=6)
    run_stage(head_only, config, verbose=False)
    start, warmed = load_checkpoint(str(folder), 16), load_checkpoint(str(tmp_path / "head" / "encoder"), 16)
    for before, after in zip(start.backbone.get_weights(), warmed.backbone.get_weights()):
        np.testing.assert_array_equal(before, after)
    # The fresh head's output bias starts at zero; trained, it moves.
    assert np.abs(warmed.mlm_head["cls/predictions/output_bias"]).max() > 1e-4
    continued = dataclasses.replace(config, init_checkpoint=str(tmp_path / "head" / "encoder"),
                                    output_dir=str(tmp_path / "continued"), num_train_steps=2)
    run_stage(objective, continued, verbose=False)
    assert not np.array_equal(load_checkpoint(str(tmp_path / "continued" / "encoder"), 16).backbone.get_weights()[0],
                              warmed.backbone.get_weights()[0])


@pytest.mark.slow
def test_a_far_too_large_learning_rate_stops_the_run_before_it_saves_a_collapsed_encoder(mlm_setup, caplog):
    """--learning_rate=1e6 kept every loss finite and wrote an encoder mapping every text to one
    vector of norm 3.3e7; the run now stops at the first logging step, naming why, and warns at the start."""
    from dialoguecse_tf.training.health import EncoderCollapseError

    objective, setup = mlm_setup
    config = dataclasses.replace(setup, learning_rate=1e6, num_warmup_steps=0, num_train_steps=6, log_steps=2,
                                 save_checkpoints_steps=2)
    with pytest.raises(EncoderCollapseError) as error:
        run_stage(objective, config, verbose=False)
    message = str(error.value)
    assert "\n" not in message and "grew from norm" in message and "by step 2 (learning rate " in message
    assert not os.path.exists(os.path.join(config.output_dir, "checkpoints", "ckpt-2.index"))
    assert not os.path.exists(os.path.join(config.output_dir, ENCODER_DIR))
    assert any("far outside every preset's range" in record.getMessage() for record in caplog.records)


def test_the_probes_spread_and_norm_are_their_numpy_definitions():
    from dialoguecse_tf.training.health import spread_and_norm

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(16, 8))
    norms = np.sqrt((vectors ** 2).sum(axis=1))
    centred = vectors - vectors.mean(axis=0)
    spread, norm = spread_and_norm(vectors)
    np.testing.assert_allclose(norm, norms.mean())
    np.testing.assert_allclose(spread, np.sqrt((centred ** 2).sum(axis=1)).mean() / norms.mean())
    assert spread_and_norm(np.tile(vectors[:1], (16, 1)))[0] < 1e-12  # one vector for every input


@pytest.mark.slow
def test_progress_into_a_file_is_a_plain_line_per_logging_step(mlm_setup, capfd, caplog):
    """Not a terminal (here: pytest's capture): no bar redrawn with ANSI codes and carriage returns."""
    import logging

    objective, setup = mlm_setup
    config = dataclasses.replace(setup, num_train_steps=4, log_steps=2)
    with caplog.at_level(logging.INFO, logger="absl"):
        run_stage(objective, config, verbose=True)
    out, err = capfd.readouterr()
    assert "\x1b[" not in out + err and "\r" not in out + err
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("step ")]
    assert [line.split(":")[0] for line in lines] == ["step 2/4", "step 4/4"] and "loss " in lines[0]
