"""Unsupervised SimCSE beyond the shared objective harness: its loss against a NumPy transcription
of the release, its two dropout views, its pooling in training and at inference (the written
encoder, evaluation and exports), and the HuggingFace Trainer's optimizer."""

import dataclasses
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

import stage_runs
from dialoguecse_tf import losses, stage
from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.encoder.backbone import build_backbone, run_backbone
from dialoguecse_tf.encoder.checkpoints import load_checkpoint, save_checkpoint
from dialoguecse_tf.models import SimCSEModel
from dialoguecse_tf.objectives.simcse import SimCSEObjective, SimCSEOptions, view_metrics
from dialoguecse_tf.records.pairs import (PAIR_INPUT_IDS, PAIR_INPUT_MASK, RECORD_TYPE_PAIRS, PairRecordSpec,
                                          write_pair_records)
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.records.reader import read_records_info

TEXTS = ["where is my order", "i want a refund please", "hello", "track my package please", "change my address"]


def _release_loss(z1, z2, temp):
    """`cl_forward` (simcse/models.py:194-212) in NumPy: `Similarity` is nn.CosineSimilarity(dim=-1)
    over z1.unsqueeze(1) and z2.unsqueeze(0), divided by temp; `CrossEntropyLoss` with labels
    arange(N), mean reduction."""
    norms = np.maximum(np.linalg.norm(z1, axis=1)[:, None] * np.linalg.norm(z2, axis=1)[None, :], 1e-8)
    cos_sim = (z1 @ z2.T) / norms / temp
    log_softmax = cos_sim - np.log(np.exp(cos_sim - cos_sim.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - cos_sim.max(1, keepdims=True)
    return -np.mean(log_softmax[np.arange(len(z1)), np.arange(len(z1))])


def test_loss_is_the_releases_one_directional_cross_entropy():
    rng = np.random.default_rng(0)
    z1, z2 = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    per_anchor = losses.simcse_per_anchor_loss(tf.constant(z1, tf.float32), tf.constant(z2, tf.float32), 0.05)
    assert per_anchor.shape == (6,)
    assert float(tf.reduce_mean(per_anchor)) == pytest.approx(_release_loss(z1, z2, 0.05), rel=1e-5)
    # One direction: z2 is never an anchor, so swapping the views changes the loss.
    swapped = float(tf.reduce_mean(losses.simcse_per_anchor_loss(tf.constant(z2, tf.float32),
                                                                 tf.constant(z1, tf.float32), 0.05)))
    assert swapped == pytest.approx(_release_loss(z2, z1, 0.05), rel=1e-5)
    assert abs(swapped - _release_loss(z1, z2, 0.05)) > 1e-3
    with pytest.raises(ValueError, match="temperature"):
        losses.simcse_per_anchor_loss(tf.constant(z1, tf.float32), tf.constant(z2, tf.float32), 0.0)


def test_view_metrics_by_hand():
    first = tf.constant([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    second = tf.constant([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    metrics = {key: float(value) for key, value in view_metrics(first, second).items()}
    # cos(z1_i, z2_j): row 0 [1, 1, .707], row 1 [0, 0, .707], row 2 [.707, .707, 1].
    r = 1 / np.sqrt(2)
    assert metrics["positive_cosine"] == pytest.approx((1 + 0 + 1) / 3)
    assert metrics["negative_cosine"] == pytest.approx((1 + r + 0 + r + r + r) / 6, rel=1e-6)
    # Row 0 ties (not a win: a collapsed encoder ties everywhere), row 1 prefers z2_2, row 2 its own.
    assert metrics["positive_ranked_first"] == pytest.approx(1 / 3)


def _pair_batch(tokenizer, texts, partners=None):
    partners = texts if partners is None else partners
    first, second = tokenizer(texts), tokenizer(partners)
    return {PAIR_INPUT_IDS: tf.stack([first["token_ids"], second["token_ids"]], axis=1),
            PAIR_INPUT_MASK: tf.stack([first["padding_mask"], second["padding_mask"]], axis=1)}


def test_the_two_views_of_a_sentence_differ_only_through_dropout(tiny_bert_config, tiny_vocab_file):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    batch = _pair_batch(tokenizer, TEXTS)
    keras.utils.set_random_seed(0)
    model = SimCSEModel(build_backbone(tiny_bert_config), "cls", num_length_buckets=2)
    assert tiny_bert_config.hidden_dropout_prob == 0.1
    noisy = model(batch, training=True)["embeddings"].numpy()
    assert np.abs(noisy[:, 0] - noisy[:, 1]).max() > 1e-3
    quiet = model(batch, training=False)["embeddings"].numpy()
    # Equal up to float rounding: length buckets encode the two copies in different groups.
    np.testing.assert_allclose(quiet[:, 0], quiet[:, 1], atol=1e-6)
    without_dropout = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = SimCSEModel(build_backbone(without_dropout), "cls")
    views = model(batch, training=True)["embeddings"].numpy()
    np.testing.assert_allclose(views[:, 0], views[:, 1], atol=1e-6)


@pytest.mark.parametrize("pooler, mlp_only_train, inference", [
    ("cls", True, "cls"), ("cls", False, "pooler"), ("cls_before_pooler", True, "cls"), ("avg", False, "mean")])
def test_training_pooling_and_the_inference_pooling_the_encoder_records(tiny_bert_config, tiny_vocab_file, pooler,
                                                                      mlp_only_train, inference):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    keras.utils.set_random_seed(1)
    objective = SimCSEObjective(SimCSEOptions(pooler=pooler, mlp_only_train=mlp_only_train))
    backbone = build_backbone(tiny_bert_config)
    start_pooler = [w.copy() for w in backbone.pooled_dense.get_weights()]
    model = objective.build_model(backbone, tiny_bert_config, tokenizer, 1)
    objective.initialize_from(model, types.SimpleNamespace(config=tiny_bert_config))
    assert objective.sentence_pooling() == inference
    trained = model(_pair_batch(tokenizer, TEXTS), training=False)["embeddings"].numpy()[:, 0]
    packed = tokenizer(TEXTS)
    outputs = run_backbone(backbone, packed["token_ids"], packed["padding_mask"])
    cls = outputs["sequence_output"].numpy()[:, 0]
    if pooler == "cls":
        # The release's fresh MLP: N(0, 0.02), zero bias, in place of the start's pooler.
        kernel, bias = backbone.pooled_dense.get_weights()
        assert abs(kernel.std() - tiny_bert_config.initializer_range) < 0.004 and not bias.any()
        assert not np.array_equal(kernel, start_pooler[0])
        np.testing.assert_allclose(trained, np.tanh(cls @ kernel + bias), atol=1e-5)
        assert backbone.pooled_dense.trainable
    else:
        assert not backbone.pooled_dense.trainable
        np.testing.assert_array_equal(backbone.pooled_dense.get_weights()[0], start_pooler[0])
    # The inference path embeds as recorded: [CLS] without the MLP unless it is kept.
    encoded = SentenceEncoder(backbone, tokenizer, pooling=inference).encode(TEXTS, sort_by_length=False)
    expected = {"cls": cls, "pooler": trained, "mean": trained}[inference]
    np.testing.assert_allclose(encoded, expected, atol=1e-5)
    if pooler == "cls" and mlp_only_train:
        assert np.abs(encoded - trained).max() > 1e-3


def test_options_are_checked():
    with pytest.raises(ValueError, match="pooler must be one of"):
        SimCSEOptions(pooler="avg_top2")
    with pytest.raises(ValueError, match="temperature"):
        SimCSEOptions(temperature=0)
    with pytest.raises(ValueError, match="weight_decay"):
        SimCSEOptions(weight_decay=-0.1)


def _hf_adamw(param, grads, lrs, eps=1e-8, beta1=0.9, beta2=0.999, max_grad_norm=1.0):
    """transformers 4.2.1's Trainer step in NumPy: clip_grad_norm_ to max_grad_norm, then
    `AdamW.step` (correct_bias=True, weight_decay 0): exp_avg_sq.sqrt() + eps as the
    denominator, lr * sqrt(1 - beta2^t) / (1 - beta1^t) as the step size."""
    m, v = np.zeros_like(param), np.zeros_like(param)
    for t, (grad, lr) in enumerate(zip(grads, lrs), 1):
        norm = np.linalg.norm(grad)
        grad = grad * min(1.0, max_grad_norm / (norm + 1e-6))
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        step = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        param = param - step * m / (np.sqrt(v) + eps)
    return param


def test_optimizer_is_the_trainers_adamw_with_linear_decay():
    objective = SimCSEObjective()
    config = stage.TrainConfig(learning_rate=3e-5, num_warmup_steps=0)
    optimizer = objective.create_optimizer(config, 4, None)
    variable = keras.Variable(np.array([0.5, -0.2, 0.1], np.float32))
    # Small gradients, where epsilon matters, and one the clipping scales down.
    grads = [np.array([1e-6, -2e-6, 3e-7]), np.array([3.0, 0.5, -1.0]), np.array([-1e-5, 1e-5, 2e-5])]
    for grad in grads:
        optimizer.apply_gradients([(tf.constant(grad, tf.float32), variable)])
    # The Trainer's linear schedule without warmup: lr * (T - t) / T at steps t = 0, 1, 2 of T = 4.
    expected = _hf_adamw(np.array([0.5, -0.2, 0.1]), grads, [3e-5 * (4 - t) / 4 for t in range(3)])
    np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=1e-9)
    assert optimizer.weight_decay == 0.0


def _self_pair_records(folder, tokenizer):
    texts = [text for topic in stage_runs.TOPICS for text in topic]
    dialogues = [Dialogue(str(i), (Turn("0", text),)) for i, text in enumerate(texts)]
    write_pair_records(dialogues, tokenizer, str(folder), PairRecordSpec(10, pairing="self"), min_words=0)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A few steps of SimCSE with its defaults on self pairs, evaluated every 2 steps."""
    from conftest import tiny_bert_config_for, write_tiny_vocab

    folder = tmp_path_factory.mktemp("simcse")
    vocab_file = write_tiny_vocab(folder / "vocab.txt")
    tokenizer = Tokenizer(vocab_file, max_seq_length=10)
    _self_pair_records(folder / "pairs", tokenizer)
    config = tiny_bert_config_for(vocab_file)
    keras.utils.set_random_seed(0)
    save_checkpoint(str(folder / "init"), build_backbone(config), config, tokenizer)
    files = stage_runs.write_evaluation_files(folder)
    objective, train_config = stage.configure(
        "simcse", train_file=[str(folder / "pairs" / "pairs-*")], output_dir=str(folder / "run"),
        init_checkpoint=str(folder / "init"), max_seq_length=10, train_batch_size=8, learning_rate=1e-3,
        num_train_steps=4, log_steps=1, eval_steps=2, eval_sts_file=files["sts"])
    poolings = []

    class RecordingEncoder(SentenceEncoder):
        def __init__(self, *args, **kwargs):
            poolings.append(kwargs["pooling"])
            super().__init__(*args, **kwargs)

    stage.SentenceEncoder = RecordingEncoder
    try:
        logs = stage.run_stage(objective, train_config, verbose=False)
    finally:
        stage.SentenceEncoder = SentenceEncoder
    return folder, logs, poolings


@pytest.mark.slow
def test_the_written_encoder_embeds_by_cls_without_the_trained_mlp(trained_run):
    folder, logs, _ = trained_run
    encoder_dir = str(folder / "run" / stage.ENCODER_DIR)
    loaded = load_checkpoint(encoder_dir, 10)
    assert loaded.metadata["pooling"] == "cls" and loaded.metadata["pairing"] == "self"
    assert loaded.metadata["pooler"] == "cls" and loaded.metadata["mlp_only_train"] is True
    # The MLP trained and is written where BERT keeps its pooler; the embedding does not use it.
    start = load_checkpoint(str(folder / "init"), 10)
    assert not np.allclose(loaded.backbone.pooled_dense.get_weights()[0], start.backbone.pooled_dense.get_weights()[0])
    encoded = SentenceEncoder.from_checkpoint(encoder_dir, 10).encode(TEXTS)
    packed = loaded.tokenizer(TEXTS)
    outputs = run_backbone(loaded.backbone, packed["token_ids"], packed["padding_mask"])
    np.testing.assert_allclose(encoded, outputs["sequence_output"].numpy()[:, 0], atol=1e-5)
    assert np.abs(encoded - outputs["pooled_output"].numpy()).max() > 1e-3
    assert np.isfinite(logs["loss"]) and 0 <= logs["positive_ranked_first"] <= 1


@pytest.mark.slow
def test_evaluation_during_training_and_after_it_pools_with_cls(trained_run):
    from dialoguecse_tf.evaluation.baselines import CheckpointEmbedders, build_checkpoint_model
    from dialoguecse_tf.evaluation.suite import EvaluationSuite, SuiteEntry

    folder, _, poolings = trained_run
    assert poolings == ["cls", "cls"]
    best_dir = str(folder / "run" / stage.BEST_ENCODER_DIR)
    best = load_checkpoint(best_dir, 10).metadata
    assert best["pooling"] == "cls" and best["step"] in (2, 4)
    (dataset,) = EvaluationSuite.from_entries([SuiteEntry("dev", "dsts", str(folder / "sts.txt"))]).datasets
    # The stage's score of the best encoder is its score embedded as the evaluation embeds it.
    embedders = CheckpointEmbedders.from_checkpoint(best_dir, 10)
    built = build_checkpoint_model(embedders)
    assert embedders.own_pooling == "cls" and "[CLS]" in built.description
    assert dataset(built.embed_fn, None)["corr"] == pytest.approx(best["eval"]["corr"], abs=1e-6)


@pytest.mark.slow
def test_exports_embed_by_cls(trained_run, tmp_path):
    from sentence_transformers import SentenceTransformer

    from dialoguecse_tf.serving.interop import EncoderExportConfig, export_encoder
    from dialoguecse_tf.serving.savedmodel import ExportConfig, ExportedEncoder, run_export

    folder, _, _ = trained_run
    encoder_dir = str(folder / "run" / stage.ENCODER_DIR)
    expected = SentenceEncoder.from_checkpoint(encoder_dir, 10, pooling="cls").encode(TEXTS)
    saved_model = run_export(ExportConfig(encoder_dir, str(tmp_path / "serving"), max_seq_length=10))
    np.testing.assert_allclose(ExportedEncoder(saved_model).encode(TEXTS), expected, atol=1e-5)
    hf = export_encoder(EncoderExportConfig(encoder_dir, str(tmp_path / "hf"), max_seq_length=10))
    np.testing.assert_allclose(SentenceTransformer(hf, device="cpu").encode(TEXTS), expected, atol=1e-5)
    # The export records its pooling, so loading it back embeds the same way.
    np.testing.assert_allclose(SentenceEncoder.from_checkpoint(hf, 10).encode(TEXTS), expected, atol=1e-5)


def test_pair_records_of_two_texts_train_the_pair_mode_with_a_warning(tiny_vocab_file, tmp_path, caplog):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=10)
    dialogue = Dialogue("d", tuple(Turn(str(i % 2), text) for i, text in enumerate(TEXTS)))
    write_pair_records([dialogue], tokenizer, str(tmp_path / "pairs"), PairRecordSpec(10), min_words=0)
    spec, _ = read_records_info(str(tmp_path / "pairs"), RECORD_TYPE_PAIRS)
    objective = SimCSEObjective()
    objective.check_records(spec, str(tmp_path / "pairs"))
    # One such warning (a worker that ran other tests first may log others, e.g. TensorFlow's).
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len([warning for warning in warnings if "not unsupervised SimCSE" in warning]) == 1, warnings
    assert objective.metadata()["pairing"] == "consecutive"
    assert dataclasses.asdict(objective.options).items() <= objective.metadata().items()
