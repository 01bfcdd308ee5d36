"""DialogueEncoder in bfloat16: the vectors of float32 within bfloat16's rounding, float32 vectors,
float32 variables. (The dialogue encoder against dial2vec's training model: tests/models/test_models_dial2vec.py.)"""

import keras
import numpy as np
import pytest

from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import save_checkpoint
from dialoguecse_tf.encoder.dialogue import DialogueEncoder
from dialoguecse_tf.encoder.pooling import DIALOGUE_POOLING_MODES
from dialoguecse_tf.encoder.tokenization import Tokenizer

DIALOGUES = [
    [("user", "where is my order?"), ("agent", "let me track the package"), ("user", "thanks")],
    [("a", "i want a refund please"), ("b", "the refund is late"), ("a", "money back please"), ("b", "hello")],
    [("user", "change my address"), ("agent", "please")],
]
# As tests/encoder/test_sentence.py: measured on this tiny random encoder, the cosines to float32's
# vectors were at least 0.999995 and the errors at most 0.3% of the float32 vector's norm (both poolings).
BFLOAT16_MIN_COSINE = 0.999
BFLOAT16_MAX_RELATIVE_ERROR = 0.05


@pytest.fixture
def parts(tiny_vocab_file, tiny_bert_config):
    config = tiny_bert_config.replace(max_position_embeddings=64)
    keras.utils.set_random_seed(5)
    return build_backbone(config), config, Tokenizer(tiny_vocab_file, max_seq_length=40)


@pytest.mark.slow
@pytest.mark.parametrize("pooling", DIALOGUE_POOLING_MODES)
def test_bfloat16_dialogues_match_float32_in_float32_vectors(parts, pooling):
    backbone, _, tokenizer = parts
    plain = DialogueEncoder(backbone, tokenizer, max_seq_length=40, pooling=pooling)
    half = DialogueEncoder(backbone, tokenizer, max_seq_length=40, pooling=pooling, precision="bfloat16")
    assert (plain.precision, half.precision) == ("float32", "bfloat16")
    assert backbone.compute_dtype == "float32" and {v.dtype for v in half.backbone.weights} == {"float32"}
    reference, vectors = plain.encode_dialogues(DIALOGUES), half.encode_dialogues(DIALOGUES)
    assert vectors.dtype == np.float32
    norms = np.linalg.norm(reference, axis=1)
    cosines = (vectors * reference).sum(1) / (np.linalg.norm(vectors, axis=1) * norms)
    errors = np.linalg.norm(vectors - reference, axis=1) / norms
    assert cosines.min() > BFLOAT16_MIN_COSINE and errors.max() < BFLOAT16_MAX_RELATIVE_ERROR, (cosines, errors)
    assert half.encode_utterances(["where is my order?", "thanks"]).dtype == np.float32


@pytest.mark.slow
def test_a_checkpoint_loads_for_dialogues_in_bfloat16(parts, tmp_path):
    backbone, config, tokenizer = parts
    path = save_checkpoint(str(tmp_path / "encoder"), backbone, config, tokenizer)
    loaded = DialogueEncoder.from_checkpoint(path, max_seq_length=40, precision="bfloat16")
    assert loaded.precision == "bfloat16" and loaded.backbone.compute_dtype == "bfloat16"
    np.testing.assert_allclose(loaded.encode_dialogues(DIALOGUES),
                               DialogueEncoder(backbone, tokenizer, max_seq_length=40).encode_dialogues(DIALOGUES),
                               rtol=BFLOAT16_MAX_RELATIVE_ERROR, atol=BFLOAT16_MAX_RELATIVE_ERROR)
