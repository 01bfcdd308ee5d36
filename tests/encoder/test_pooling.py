import numpy as np
import pytest

from dialoguecse_tf.encoder.pooling import MaskedMeanPooling, SentencePooling
from harness import run_serialization_test


def numpy_masked_mean(embeddings, mask):
    out = np.zeros(embeddings.shape[:-2] + embeddings.shape[-1:])
    for index in np.ndindex(*embeddings.shape[:-2]):
        rows = embeddings[index][mask[index].astype(bool)]
        out[index] = rows.mean(0) if len(rows) else 0.0
    return out


def test_masked_mean_matches_numpy_on_nested_shapes():
    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    mask = (rng.random((2, 3, 5)) > 0.4).astype(np.int32)
    mask[0, 1] = 0  # a missing turn pools to zeros, not NaN
    got = np.asarray(MaskedMeanPooling()(embeddings, mask))
    np.testing.assert_allclose(got, numpy_masked_mean(embeddings, mask), atol=1e-6)
    assert np.all(got[0, 1] == 0)


def test_padding_values_do_not_change_the_mean():
    rng = np.random.default_rng(1)
    embeddings = rng.standard_normal((1, 6, 3)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0, 0]])
    noisy = embeddings.copy()
    noisy[0, 3:] = 1e3
    pool = MaskedMeanPooling()
    np.testing.assert_allclose(np.asarray(pool(embeddings, mask)), np.asarray(pool(noisy, mask)), atol=1e-6)


def test_cls_pooling_and_validation():
    embeddings = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    mask = np.ones((2, 3), np.int32)
    np.testing.assert_array_equal(np.asarray(SentencePooling("cls")(embeddings, mask)), embeddings[:, 0])
    with pytest.raises(ValueError, match="pooling"):
        SentencePooling("max")
    assert run_serialization_test(SentencePooling("cls"), (embeddings, mask)).pooling == "cls"


def test_pooler_pooling_is_berts_pooled_output():
    embeddings = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    mask = np.ones((2, 3), np.int32)
    pooled = -embeddings[:, 0]
    np.testing.assert_array_equal(np.asarray(SentencePooling("pooler")(embeddings, mask, pooled)), pooled)
    with pytest.raises(ValueError, match="pooled_output"):
        SentencePooling("pooler")(embeddings, mask)
