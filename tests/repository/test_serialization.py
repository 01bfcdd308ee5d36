"""Every class the package registers with Keras passes `harness.run_serialization_test` on a
small instance. The classes are found, not listed: every module that registers one is imported
and Keras' registry read, so a class added later fails here until it has a factory below."""

import importlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_ROOT
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.bert_config import BertConfig
from dialoguecse_tf.encoder.pooling import MaskedMeanPooling, SentencePooling
from dialoguecse_tf.models.dial2vec import Dial2vecModel
from dialoguecse_tf.models.dialoguecse import DialogueCSEModel, ReleasedDialogueCSEModel
from dialoguecse_tf.models.dse import DSEModel
from dialoguecse_tf.models.layers import MatchingGuidedEmbedding, RoundAttention, TurnAggregation
from dialoguecse_tf.models.mlm import BertPretrainer
from dialoguecse_tf.models.siamese import SiameseBertModel
from dialoguecse_tf.models.simcse import SimCSEModel
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET)
from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                              DIALOGUE_TURN_IDS)
from dialoguecse_tf.records.mlm import INPUT_IDS, INPUT_MASK, MASKED_LM_POSITIONS, SEGMENT_IDS
from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PAIR_INPUT_MASK
from dialoguecse_tf.training.optimizers import ExponentialDecayFloor, WarmupLinearDecay
from harness import run_serialization_test

PACKAGE = "dialoguecse_tf"
B, T, K, L, D = 2, 2, 3, 6, 16


def registered_classes() -> dict:
    """Keras' registered name ("dialoguecse_tf>Class") -> class, for every module of the package
    that registers one."""
    for path in sorted((REPO_ROOT / PACKAGE).rglob("*.py")):
        if "register_keras_serializable" in path.read_text(encoding="utf-8"):
            module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
            importlib.import_module(module.removesuffix(".__init__"))
    return {name: cls for name, cls in keras.saving.get_custom_objects().items()
            if name.startswith(f"{PACKAGE}>")}


def _bert_config():
    return BertConfig(vocab_size=30, hidden_size=D, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=16, hidden_act="gelu_exact",
                      layer_norm_eps=1e-3)


def _backbone():
    return build_backbone(_bert_config())


def _ids_and_mask(rng, shape):
    lengths = rng.integers(2, shape[-1] + 1, size=shape[:-1])
    mask = (np.arange(shape[-1]) < lengths[..., None]).astype(np.int32)
    return tf.constant(rng.integers(5, 30, size=shape) * mask), tf.constant(mask)


def _contrastive_batch(num_slots=T):
    rng = np.random.default_rng(0)
    context_ids, context_mask = _ids_and_mask(rng, (B, num_slots, L))
    candidate_ids, candidate_mask = _ids_and_mask(rng, (B, K, L))
    turn_mask = np.ones((B, num_slots), np.int32)
    turn_mask[1, 0] = 0
    return {CONTEXT_INPUT_IDS: context_ids * turn_mask[..., None], CONTEXT_INPUT_MASK: context_mask * turn_mask[..., None],
            CONTEXT_TURN_MASK: tf.constant(turn_mask), CONTEXT_TURN_OFFSET: tf.zeros((B, num_slots), tf.int32),
            CANDIDATE_INPUT_IDS: candidate_ids, CANDIDATE_INPUT_MASK: candidate_mask}


def _pair_batch():
    ids, mask = _ids_and_mask(np.random.default_rng(1), (B, 2, L))
    return {PAIR_INPUT_IDS: ids, PAIR_INPUT_MASK: mask}


def _dialogue_batch():
    rng = np.random.default_rng(2)
    ids, mask = _ids_and_mask(rng, (B, 2, L))
    # One token per turn: window=1 then drops most token pairs.
    turns = np.broadcast_to(np.arange(L), (B, 2, L))
    return {DIALOGUE_INPUT_IDS: ids, DIALOGUE_INPUT_MASK: mask, DIALOGUE_ROLE_IDS: tf.constant(turns % 2),
            DIALOGUE_TURN_IDS: tf.constant(turns)}


def _mlm_batch():
    ids, mask = _ids_and_mask(np.random.default_rng(3), (B, L))
    return {INPUT_IDS: ids, INPUT_MASK: mask, SEGMENT_IDS: tf.zeros_like(ids),
            MASKED_LM_POSITIONS: tf.constant([[1, 0], [1, 2]])}


def _tokens(*shape, seed=4):
    return tf.constant(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def _mask(*shape):
    mask = np.ones(shape, np.int32)
    mask[..., -1] = 0
    return tf.constant(mask)


# Class -> a factory of (a small unused instance, the arguments of one call). The instances use
# the non-default settings, so a setting get_config forgot shows as a changed config or output.
FACTORIES = {
    WarmupLinearDecay: lambda: (WarmupLinearDecay(1e-3, num_warmup_steps=4, num_train_steps=20), (6,)),
    ExponentialDecayFloor: lambda: (ExponentialDecayFloor(1e-3, 0.5, 10, 1e-5), (15,)),
    MaskedMeanPooling: lambda: (MaskedMeanPooling(name="mean_pool"), (_tokens(B, L, D), _mask(B, L))),
    SentencePooling: lambda: (SentencePooling("cls", name="cls_pool"), (_tokens(B, L, D), _mask(B, L))),
    MatchingGuidedEmbedding: lambda: (MatchingGuidedEmbedding(name="mge"), (
        _tokens(B, T, L, D), _mask(B, T, L), _tokens(B, K, L, D, seed=5), _mask(B, K, L))),
    TurnAggregation: lambda: (TurnAggregation("attention", attention_hidden_size=7, name="agg"), (
        _tokens(B, K, T, L, D), _mask(B, T, L), tf.constant([[1, 1], [0, 1]]))),
    RoundAttention: lambda: (RoundAttention(5, name="rounds"), (_tokens(B, 3, D), tf.constant([[1, 0, 1], [0, 0, 0]]))),
    DialogueCSEModel: lambda: (DialogueCSEModel(_backbone(), aggregation="attention", attention_hidden_size=6,
                                                num_length_buckets=2), (_contrastive_batch(),)),
    ReleasedDialogueCSEModel: lambda: (ReleasedDialogueCSEModel(
        _backbone(), attention_size=8, num_length_buckets=2, matching_side="response",
        normalize_matching_tokens=True, empty_round_token_ids=(2, 3)), (_contrastive_batch(num_slots=4),)),
    SiameseBertModel: lambda: (SiameseBertModel(_backbone(), matching_hidden_size=6, cls_id=2, num_length_buckets=2),
                               (_contrastive_batch(),)),
    DSEModel: lambda: (DSEModel(_backbone(), projection_size=5, num_length_buckets=2, head_init="uniform"),
                       (_pair_batch(),)),
    SimCSEModel: lambda: (SimCSEModel(_backbone(), pooler="cls", num_length_buckets=2), (_pair_batch(),)),
    Dial2vecModel: lambda: (Dial2vecModel(_backbone(), window=1, role_segment_ids=True), (_dialogue_batch(),)),
    BertPretrainer: lambda: (BertPretrainer(_backbone(), _bert_config()), (_mlm_batch(),)),
}

REGISTERED = registered_classes()


def test_the_registry_is_found_and_every_factory_is_of_a_registered_class():
    assert len(REGISTERED) >= len(FACTORIES)
    assert set(FACTORIES) <= set(REGISTERED.values())


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_registered_class_round_trips(name):
    cls = REGISTERED[name]
    if cls not in FACTORIES:
        pytest.fail(f"{name} is registered with Keras but has no small-instance factory in {__name__}.FACTORIES")
    instance, call_args = FACTORIES[cls]()
    run_serialization_test(instance, call_args)


def test_the_harness_catches_a_setting_get_config_forgets():
    @keras.saving.register_keras_serializable(package="tests_harness")
    class Forgetful(SentencePooling):
        def get_config(self):
            return {key: value for key, value in super().get_config().items() if key != "pooling"}

    with pytest.raises(AssertionError):
        run_serialization_test(Forgetful("cls"), (_tokens(B, L, D), _mask(B, L)))
