import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf import precision
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import assign_bert_variables, save_checkpoint
from dialoguecse_tf.encoder.pooling import POOLING_MODES
from dialoguecse_tf.encoder.sentence import SentenceEncoder, encode_in_batches
from dialoguecse_tf.encoder.tokenization import Tokenizer
from numpy_bert import bert_forward, random_bert_weights

TEXTS = ["where is my order?", "refund please", "hello", "i want to change my address", "退货"]


@pytest.fixture
def parts(tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=4)
    backbone = build_backbone(tiny_bert_config)
    assign_bert_variables(backbone, weights, source="test")
    return backbone, weights, tiny_bert_config, tiny_vocab_file


def test_encode_is_masked_mean_of_bert_output(parts):
    backbone, weights, config, vocab = parts
    encoder = SentenceEncoder(backbone, Tokenizer(vocab, max_seq_length=10))
    vectors = encoder.encode(TEXTS, batch_size=2)
    inputs = encoder.tokenizer(TEXTS)
    mask = inputs["padding_mask"].numpy()
    sequence, _ = bert_forward(weights, config, inputs["token_ids"].numpy(), mask)
    expected = (sequence * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    assert vectors.shape == (len(TEXTS), config.hidden_size) and vectors.dtype == np.float32
    assert np.abs(vectors - expected).max() < 1e-4


def test_padding_length_does_not_change_the_vector(parts):
    backbone, _, _, vocab = parts
    short = SentenceEncoder(backbone, Tokenizer(vocab, max_seq_length=10)).encode(TEXTS)
    long = SentenceEncoder(backbone, Tokenizer(vocab, max_seq_length=24)).encode(TEXTS)
    assert np.abs(short - long).max() < 1e-4


def test_batching_normalize_and_cls(parts):
    backbone, weights, config, vocab = parts
    encoder = SentenceEncoder(backbone, Tokenizer(vocab, max_seq_length=10))
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=1), encoder.encode(TEXTS, batch_size=64), atol=1e-5)
    unit = encoder.encode(TEXTS, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5)
    cls = SentenceEncoder(backbone, encoder.tokenizer, pooling="cls").encode(TEXTS)
    inputs = encoder.tokenizer(TEXTS)
    sequence, _ = bert_forward(weights, config, inputs["token_ids"].numpy(), inputs["padding_mask"].numpy())
    assert np.abs(cls - sequence[:, 0]).max() < 1e-4
    assert encoder.encode([]).shape == (0, config.hidden_size)
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(TEXTS, batch_size=0)


def test_fast_paths_give_the_plain_vectors_in_input_order(parts):
    backbone, _, _, vocab = parts
    tokenizer = Tokenizer(vocab, max_seq_length=24)
    texts = TEXTS * 3 + ["order"]
    plain = SentenceEncoder(backbone, tokenizer, trim_padding=False).encode(texts, batch_size=4, sort_by_length=False)
    for encoder in (SentenceEncoder(backbone, tokenizer), SentenceEncoder(backbone, tokenizer, jit_compile=True)):
        fast = encoder.encode(texts, batch_size=4)
        assert np.abs(fast - plain).max() < 1e-5


def test_encode_in_batches_sorts_by_length_and_restores_order():
    texts = TEXTS * 3 + ["order"]
    served = []

    def embed_lengths(batch):
        served.append(batch)
        return np.array([[len(text)] for text in batch], np.float32)

    vectors = encode_in_batches(texts, embed_lengths, dimension=1, batch_size=4)
    np.testing.assert_array_equal(vectors[:, 0], [len(t) for t in texts])
    assert [len(t) for t in served[0]] == sorted((len(t) for t in texts), reverse=True)[:4]


def test_progress_stays_off_stdout(capsys, caplog):
    import logging

    # No terminal here (pytest captures stderr): one plain line through absl logging at the end.
    with caplog.at_level(logging.INFO, logger="absl"):
        encode_in_batches(["a", "bb", "ccc"], lambda batch: np.zeros((len(batch), 2)), 2, batch_size=1,
                          verbose=True)
    out, _ = capsys.readouterr()
    assert out == "" and [record.getMessage() for record in caplog.records] == ["batch 3/3"]


# encode() in bfloat16 (mixed: bfloat16 compute, float32 variables) against float32 on the same
# weights: on the tiny random encoder the vectors' cosines to float32's were at least 0.99990 over
# the three poolings, their errors at most 1.4% of the float32 vector's norm (bfloat16 rounds by up
# to 0.2% per operation, through two layers); the bounds leave room for other weights.
BFLOAT16_MIN_COSINE = 0.999
BFLOAT16_MAX_RELATIVE_ERROR = 0.05


def relative_errors(vectors, reference) -> tuple:
    """(the smallest cosine of matching rows, the largest error over the reference row's norm)."""
    norms = np.linalg.norm(reference, axis=1)
    cosines = (vectors * reference).sum(1) / (np.linalg.norm(vectors, axis=1) * norms)
    return float(cosines.min()), float((np.linalg.norm(vectors - reference, axis=1) / norms).max())


@pytest.mark.slow
@pytest.mark.parametrize("pooling", POOLING_MODES)
def test_bfloat16_encode_matches_float32_in_float32_vectors(parts, pooling):
    backbone, _, _, vocab = parts
    tokenizer = Tokenizer(vocab, max_seq_length=10)
    plain = SentenceEncoder(backbone, tokenizer, pooling=pooling)
    half = SentenceEncoder(backbone, tokenizer, pooling=pooling, precision="bfloat16")
    assert (plain.precision, half.precision) == ("float32", "bfloat16")
    # A copy computing in bfloat16; the backbone given is left as it was.
    assert half.backbone is not backbone and backbone.compute_dtype == "float32"
    assert {v.dtype for v in half.backbone.weights} == {"float32"}
    for normalize in (False, True):
        vectors = half.encode(TEXTS, batch_size=2, normalize=normalize)
        assert vectors.dtype == np.float32
        cosine, error = relative_errors(vectors, plain.encode(TEXTS, batch_size=2, normalize=normalize))
        assert cosine > BFLOAT16_MIN_COSINE and error < BFLOAT16_MAX_RELATIVE_ERROR, (cosine, error)
    inputs = tokenizer(TEXTS)
    assert half.embed_tokens(inputs["token_ids"], inputs["padding_mask"]).dtype == tf.float32
    # Asked for the precision it has, the encoder keeps the backbone.
    assert SentenceEncoder(half.backbone, tokenizer, precision="bfloat16").backbone is half.backbone


@pytest.mark.slow
def test_a_checkpoint_loads_in_bfloat16_and_is_refused_where_the_cpu_lacks_it(parts, tmp_path, monkeypatch):
    backbone, _, config, vocab = parts
    tokenizer = Tokenizer(vocab, max_seq_length=10)
    save_checkpoint(str(tmp_path / "encoder"), backbone, config, tokenizer)
    loaded = SentenceEncoder.from_checkpoint(str(tmp_path / "encoder"), max_seq_length=10, precision="bfloat16")
    assert loaded.precision == "bfloat16" and loaded.encode(TEXTS).dtype == np.float32
    monkeypatch.setattr(precision, "_first_gpu", lambda: None)
    monkeypatch.setattr(precision, "cpu_bfloat16_flags", lambda: ())
    with pytest.raises(ValueError, match="^precision bfloat16 needs a CPU with bfloat16 arithmetic"):
        SentenceEncoder.from_checkpoint(str(tmp_path / "encoder"), max_seq_length=10, precision="bfloat16")
    with pytest.raises(ValueError, match="^precision bfloat16 needs a CPU with bfloat16 arithmetic"):
        SentenceEncoder(backbone, tokenizer, precision="bfloat16")
    assert SentenceEncoder.from_checkpoint(str(tmp_path / "encoder"), max_seq_length=10).precision == "float32"
