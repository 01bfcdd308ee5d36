import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.encoder import pooling
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import assign_bert_variables
from dialoguecse_tf.evaluation import baselines
from dialoguecse_tf.evaluation.baselines import (
    CheckpointEmbedders,
    build_baseline,
    fit_principal_axes,
    fit_whitening,
)
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.evaluation.config import POOLING_MODES, FitOptions, FlowConfig
from dialoguecse_tf.evaluation.flow import NormalizingFlow, fit_flow
from dialoguecse_tf.evaluation.registry import BASELINES, display_name
from conftest import TINY_WORDS
from numpy_bert import random_bert_weights


def random_sentences(count, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(TINY_WORDS, size=rng.integers(2, 7))) for _ in range(count)]


@pytest.fixture
def embedders(tiny_bert_config, tiny_vocab_file):
    backbone = build_backbone(tiny_bert_config)
    assign_bert_variables(backbone, random_bert_weights(tiny_bert_config, seed=3), source="test")
    return CheckpointEmbedders(backbone, Tokenizer(tiny_vocab_file, max_seq_length=12), batch_size=16)


def test_registry_names_and_display_names():
    assert set(BASELINES) == set(baselines._BUILDERS) == {"cls", "avg", "whitening", "flow", "avg_token_embeddings"}
    assert display_name("flow", "BERT(adapt)") == "BERT(adapt)-flow"
    assert display_name("cls", "BERT") == "BERT-CLS"
    assert display_name("avg_token_embeddings", "BERT") == "Avg. BERT token embeddings"
    with pytest.raises(ValueError, match="unknown baseline 'glove'"):
        display_name("glove", "BERT")


def test_every_pooling_the_flags_accept_pools_as_its_numpy_definition():
    rng = np.random.default_rng(0)
    sequence = rng.normal(size=(2, 5, 3)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    pooled = rng.normal(size=(2, 3)).astype(np.float32)
    expected = {"mean": (sequence * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True),
                "cls": sequence[:, 0], "pooler": pooled}
    for mode in POOLING_MODES:
        np.testing.assert_allclose(pooling.SentencePooling(mode)(sequence, mask, pooled), expected[mode], rtol=1e-5)


def test_cls_and_avg_are_the_sentence_encoder(embedders):
    texts = ["where is my order ?", "refund please", "退 货"]
    for name, mode in (("cls", "cls"), ("avg", "mean")):
        expected = SentenceEncoder(embedders.backbone, embedders.tokenizer, pooling=mode).encode(texts)
        np.testing.assert_allclose(build_baseline(name, embedders).embed_fn(texts), expected, atol=1e-6)


def test_avg_token_embeddings_match_numpy(embedders):
    texts = ["where is my order ?", "refund refunds", "退 货 xyz", ""]
    vectors = build_baseline("avg_token_embeddings", embedders).embed_fn(texts)
    table = embedders.backbone.get_layer("token_embedding").embeddings.numpy()
    tokenizer = embedders.tokenizer
    for text, vector in zip(texts, vectors):
        pieces = tokenizer.tokenize([text])[0].numpy()[: tokenizer.max_seq_length - 2]
        expected = table[pieces].mean(axis=0) if len(pieces) else np.zeros(table.shape[1])
        np.testing.assert_allclose(vector, expected, atol=1e-6)
    assert "[UNK]" in tokenizer.tokenize_to_strings("退 货 xyz")  # unknown words still count as a piece


def test_whitening_gives_identity_covariance():
    rng = np.random.default_rng(0)
    train = (rng.normal(size=(500, 6)) @ rng.normal(size=(6, 6)) + 3.0).astype(np.float32)
    whitening = fit_whitening(train)
    white = whitening(train)
    np.testing.assert_allclose(white.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(np.cov(white, rowvar=False), np.eye(6), atol=1e-4)
    # Su et al.'s kernel, computed directly: W = U diag(1/sqrt(S)) from the SVD of the covariance.
    u, s, _ = np.linalg.svd(np.cov(train.astype(np.float64), rowvar=False))
    np.testing.assert_allclose(whitening.kernel, u / np.sqrt(s), rtol=1e-6)
    cut = fit_whitening(train, whitening_dim=2)
    np.testing.assert_allclose(cut(train), white[:, :2], atol=1e-5)
    with pytest.raises(ValueError, match=r"whitening_dim must be in 1..6"):
        fit_whitening(train, whitening_dim=7)


def test_whitening_baseline_on_bert_embeddings(embedders, tiny_bert_config):
    train = random_sentences(120)
    built = build_baseline("whitening", embedders, train)
    white = built.embed_fn(train)
    dim = tiny_bert_config.hidden_size
    # The last LayerNorm leaves pooled vectors one direction without variance.
    assert white.shape == (len(train), dim - 1) and built.fit["whitening_dim"] == dim - 1
    np.testing.assert_allclose(np.cov(white, rowvar=False), np.eye(dim - 1), atol=1e-3)
    assert fit_principal_axes(embedders.pooled("mean")(train)).stds.size == dim - 1
    with pytest.raises(ValueError, match="training sentences"):
        build_baseline("whitening", embedders, [])


def randomized_flow(dim, seed=0):
    flow = NormalizingFlow(dim, FlowConfig(num_couplings=3, hidden_units=8, seed=seed))
    flow(np.zeros((1, dim), np.float32))
    rng = np.random.default_rng(seed)
    # Away from the identity it starts as: zero-initialised output layers would hide bugs.
    for variable in flow.weights:
        variable.assign(0.5 * rng.normal(size=variable.shape))
    return flow


def test_flow_log_det_matches_autodiff_jacobian():
    flow = randomized_flow(5)
    x = tf.constant(np.random.default_rng(1).normal(size=(4, 5)), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        z, logdet = flow(x)
    jacobian = tape.batch_jacobian(z, x).numpy().astype(np.float64)
    _, expected = np.linalg.slogdet(jacobian)
    np.testing.assert_allclose(logdet.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_flow_is_invertible():
    flow = randomized_flow(6, seed=2)
    x = np.random.default_rng(3).normal(size=(10, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(flow.inverse(flow.transform(x))), x, atol=1e-4)


def test_flow_fit_lowers_nll_below_the_best_gaussian():
    rng = np.random.default_rng(0)
    a = rng.normal(size=2000)
    c = rng.exponential(size=2000)
    data = np.stack([a, a**2 + 0.1 * rng.normal(size=2000), c, np.sin(3 * c) + 0.1 * rng.normal(size=2000)], 1)
    config = FlowConfig(num_couplings=4, hidden_units=32, steps=300, batch_size=128, learning_rate=3e-3)
    flow, stats = fit_flow(data, config)
    gaussian_nll = 0.5 * np.linalg.slogdet(2 * np.pi * np.e * np.cov(data, rowvar=False, bias=True))[1] / 4
    # ActNorm's data-dependent start is a diagonal Gaussian fit; training must beat even a
    # full-covariance Gaussian, which needs the non-linear couplings.
    assert stats["nll_per_dim_before"] > gaussian_nll - 0.01
    assert stats["nll_per_dim_after"] < gaussian_nll - 0.5
    assert stats["nll_per_dim_after"] == pytest.approx(flow.nll_per_dim(data))
    z = flow.transform(data)
    assert abs(z.mean()) < 0.2 and 0.7 < z.std() < 1.3


def test_flow_baseline_embeds_in_the_span(embedders, tiny_bert_config):
    train = random_sentences(80)
    options = FitOptions(flow=FlowConfig(num_couplings=2, hidden_units=16, steps=5))
    built = build_baseline("flow", embedders, train, options)
    vectors = built.embed_fn(["where is my order", "refund please"])
    assert vectors.shape == (2, tiny_bert_config.hidden_size - 1) and np.isfinite(vectors).all()
    assert built.fit["flow_dim"] == tiny_bert_config.hidden_size - 1 and built.fit["steps"] == 5
    assert "normalising flow" in built.description


def test_bert_runs_once_per_sentence_across_baselines(embedders, monkeypatch):
    encoded = []
    original = SentenceEncoder.encode

    def counting_encode(self, texts, *args, **kwargs):
        encoded.extend((self.pooling, type(self).__name__, text) for text in texts)
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(SentenceEncoder, "encode", counting_encode)
    train = random_sentences(40, seed=5)
    texts = ["where is my order", "refund please", train[0]]
    options = FitOptions(whitening_dim=4, flow=FlowConfig(num_couplings=2, hidden_units=8, steps=2))
    for name in ("avg", "whitening", "flow"):
        fn = build_baseline(name, embedders, train, options).embed_fn
        fn(texts)
        fn(texts)
    assert len(encoded) == len(set(encoded)) == len(set(train) | set(texts))
