"""dial2vec's objective beyond the shared harness: its whole loss, from the backbone's output to
the number the optimizer minimises, against a NumPy transcription of the release."""

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.models.dial2vec import Dial2vecModel
from dialoguecse_tf.objectives.dial2vec import Dial2vecObjective, Dial2vecOptions
from dialoguecse_tf.records.spec import check_compatible
from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                              DIALOGUE_TURN_IDS, DialogueRecordSpec)
from dial2vec_batches import random_batch


def _released_loss(h, mask, roles, turns, window, temperature):
    """AlibabaResearch/DAMO-ConvAI dial2vec/network.py, transcribed line by line for [B, S, L, d]
    last-layer outputs: l.95-127 (self- and cross-representations, BertAVG with eps 1e-6),
    l.144-161 (per-role cosines, their losses summed) and l.202-216 (`calc_cos`, `calc_loss`)."""
    batch, samples, length, dim = h.shape
    h = h.reshape(-1, length, dim)
    mask, roles, turns = (x.reshape(-1, length) for x in (mask, roles, turns))
    a_mask = mask * (roles == 0)  # role_a_mask: network.py:97, 102
    b_mask = mask * (roles == 1)
    q_self = h * a_mask[..., None]
    r_self = h * b_mask[..., None]
    w = q_self @ r_self.transpose(0, 2, 1)
    view = np.abs(turns[:, :, None] - turns[:, None, :]) <= window
    w = w * view
    q_cross = w.transpose(0, 2, 1) @ q_self
    r_cross = w @ r_self

    def avg(x, m):  # BertAVG(eps=1e-6)
        return (x * m[..., None]).sum(1) / (m.sum(1, keepdims=True) + 1e-6)

    pooled = [avg(q_self, a_mask), avg(q_cross, b_mask), avg(r_self, b_mask), avg(r_cross, a_mask)]
    q_self, q_cross, r_self, r_cross = (x.reshape(batch, samples, dim) for x in pooled)

    def calc_cos(x, y):  # torch.cosine_similarity(dim=1) / temperature
        norms = np.maximum(np.linalg.norm(x, axis=-1), 1e-8) * np.maximum(np.linalg.norm(y, axis=-1), 1e-8)
        return (x * y).sum(-1) / norms / temperature

    labels = np.zeros((batch, samples))
    labels[:, 0] = 1.0  # data_provider.py:270: [1] + [0] * n_neg

    def calc_loss(pred):  # -mean(log_softmax(pred) * labels) over every B x S entry
        shifted = pred - pred.max(-1, keepdims=True)
        return -np.mean((shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))) * labels)

    logit_q = calc_cos(q_self, q_cross)
    logit_r = calc_cos(r_self, r_cross)
    return calc_loss(logit_r) + calc_loss(logit_q)


class _FixedOutputs:
    """A stand-in backbone whose last layer is a given random tensor, so the loss is checked on
    arbitrary outputs, not only on what a tiny BERT happens to produce."""

    def __init__(self, sequence_output):
        self.sequence_output = sequence_output

    def __call__(self, inputs, training=False):
        return {"sequence_output": self.sequence_output}


@pytest.mark.parametrize("window,temperature", [(0, 0.2), (1, 0.05), (10, 1.0)])
def test_loss_equals_a_numpy_transcription_of_the_release(window, temperature):
    rng = np.random.default_rng(window)
    batch, samples, length, dim = 3, 4, 16, 8
    mask, roles, turns = random_batch(rng, batch, samples, length)
    h = rng.normal(size=(batch * samples, length, dim)).astype(np.float32)
    inputs = {DIALOGUE_INPUT_IDS: tf.ones((batch, samples, length), tf.int64),
              DIALOGUE_INPUT_MASK: tf.constant(mask), DIALOGUE_ROLE_IDS: tf.constant(roles),
              DIALOGUE_TURN_IDS: tf.constant(turns)}
    objective = Dial2vecObjective(Dial2vecOptions(temperature=temperature, window=window,
                                                  num_negatives=samples - 1))
    model = Dial2vecModel(_FixedOutputs(tf.constant(h)), window=window)
    # The global batch is this one batch, so the returned share is the whole batch's mean.
    loss, _ = objective.compute_loss(model, objective.prepare_batch(inputs), False, batch)
    expected = _released_loss(h.astype(np.float64).reshape(batch, samples, length, dim), mask, roles, turns,
                              window, temperature)
    np.testing.assert_allclose(float(loss), expected, rtol=2e-5)



def test_records_must_be_cut_as_the_options_say_and_the_encoder_records_how():
    head = DialogueRecordSpec(64, 4)
    assert head.truncation == "head"
    recent = Dial2vecObjective(Dial2vecOptions(truncation="recent_turns", role_segment_ids=True))
    with pytest.raises(ValueError, match="records were written with truncation=head but truncation=recent_turns"):
        check_compatible(head, **recent.record_requirements())
    check_compatible(DialogueRecordSpec(64, 4, "recent_turns"), **recent.record_requirements())
    assert {"truncation": "recent_turns", "role_segment_ids": True}.items() <= recent.metadata().items()
    # records_info.json written before the spec had the field: those records kept the recent turns.
    assert DialogueRecordSpec.from_dict({"max_seq_length": 64, "num_negatives": 4}).truncation == "recent_turns"
    for bad in ({"truncation": "tail"}, {"role_segment_ids": 1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Dial2vecOptions(**bad)
