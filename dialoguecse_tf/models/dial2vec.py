"""dial2vec's training model (Liu et al., EMNLP 2022, section 3; the authors' released
`dial2vec/network.py`, `Dial2vec.forward` l.79-167).

Each example is S token sequences of one dialogue (the dialogue itself first, then its
negatives; `encoder.packing` layout). BERT's token types are all zero, as the release's BERT
path feeds them (`data/data_provider.py:250`): roles act only through the masks below.
`role_segment_ids=True` feeds each token's role as its token type instead (the project's earlier
encoding; the role-1 tokens then carry BERT's second token-type embedding, which MiniLM and
BERT were pretrained with for a second sentence, not a second speaker). For every sequence, with E
[L, d] the backbone's last layer and `m_0`, `m_1` [L] the masks of role 0's and role 1's
tokens (padding excluded):

* self-representations E_0 = E * m_0, E_1 = E * m_1 (zero outside their role);
* correlation C = E_1 E_0^T [L, L] (raw dot products: no scaling, no softmax, as the release
  l.111 and the paper's eq. 2-3), zeroed where the two tokens' turns are more than `window`
  apart (l.113-119; C[i, j] is non-zero only for i a role-1 and j a role-0 token);
* cross-representations E~_0 = C E_0 [L, d], whose rows sit on role 1's positions (role 0's
  tokens as role 1 sees them; the release's `Q_cross = W^T Q`), and E~_1 = C^T E_1, on role
  0's positions (`R_cross = W R`, l.121-122);
* pooled (masked mean, l.124-127): self_0 = mean_{m_0}(E_0), cross_0 = mean_{m_1}(E~_0),
  self_1 = mean_{m_1}(E_1), cross_1 = mean_{m_0}(E~_1): each cross-representation over the
  positions it lives on.

The loss (the objective's) contrasts, per role, cos(self_r, cross_r) of the dialogue against
its negatives'. The dialogue embedding is self_0 + self_1 (`pooling.interlocutor_mean`).
"""

import keras
import tensorflow as tf

from dialoguecse_tf.encoder.backbone import backbone_config, backbone_from_config, run_backbone
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                              DIALOGUE_TURN_IDS)

DEFAULT_WINDOW = 10


def cross_representations(sequence_output, padding_mask, roles, turn_ids, window: int):
    """The four pooled representations of the module docstring.

    Args:
      sequence_output: float Tensor of shape [N, L, d], the backbone's last layer.
      padding_mask: Tensor of shape [N, L], 1 for a real token.
      roles: int Tensor of shape [N, L], each token's speaker, 0 or 1.
      turn_ids: int Tensor of shape [N, L], each token's turn index.
      window: int, the largest turn distance whose correlations count.

    Returns:
      (self_0, cross_0, self_1, cross_1), each a Tensor of shape [N, d] in the
      `sequence_output` dtype.
    """
    mask = tf.cast(padding_mask, sequence_output.dtype)
    role_1 = tf.cast(tf.equal(roles, 1), sequence_output.dtype) * mask
    role_0 = mask - role_1
    self_0 = sequence_output * role_0[..., None]
    self_1 = sequence_output * role_1[..., None]
    turns = tf.cast(turn_ids, tf.int32)
    near = tf.abs(turns[:, :, None] - turns[:, None, :]) <= window
    correlation = tf.matmul(self_1, self_0, transpose_b=True) * tf.cast(near, sequence_output.dtype)
    cross_0 = tf.matmul(correlation, self_0)
    cross_1 = tf.matmul(correlation, self_1, transpose_a=True)
    return (masked_mean(self_0, role_0), masked_mean(cross_0, role_1),
            masked_mean(self_1, role_1), masked_mean(cross_1, role_0))


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class Dial2vecModel(keras.Model):
    """Batched dialogue records ([B, S, L]) -> `self_0`, `cross_0`, `self_1`, `cross_1`, each
    [B, S, d], and `embedding` [B, d] (self_0 + self_1 of sequence 0, the dialogue itself)."""

    def __init__(self, backbone, window: int = DEFAULT_WINDOW, role_segment_ids: bool = False, **kwargs):
        """Constructor for Dial2vecModel.

        Args:
          backbone: a keras-hub `BertBackbone` from `build_backbone`.
          window: non-negative int, the turn distance beyond which correlations are zeroed.
          role_segment_ids: bool, feed each token's role as its token type (module docstring).
          **kwargs: keras.Model's (name, dtype).

        Raises:
          ValueError: if `window` is not a non-negative int.
        """
        super().__init__(**kwargs)
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise ValueError(f"window must be a non-negative int, got {window!r}")
        self.backbone = backbone
        self.window = window
        self.role_segment_ids = bool(role_segment_ids)

    def call(self, inputs, training=False):
        """The self- and cross-representations of every sequence, and the dialogue embedding.

        Args:
          inputs: the batched dialogue records' dict: `dialogue_input_ids`,
            `dialogue_input_mask`, `dialogue_role_ids` and `dialogue_turn_ids`, int Tensors of
            shape [B, S, L] (sequence 0 the dialogue, then its negatives); other keys are
            ignored.
          training: bool, whether dropout is on.

        Returns:
          A dict of float32 Tensors: `self_0`, `cross_0`, `self_1`, `cross_1`, each of shape
          [B, S, D], and `embedding` of shape [B, D] (self_0 + self_1 of sequence 0).
        """
        ids = tf.cast(inputs[DIALOGUE_INPUT_IDS], tf.int32)
        samples, length = ids.shape[1], ids.shape[2]

        def flat(name):
            return tf.reshape(tf.cast(inputs[name], tf.int32), (-1, length))

        mask, roles, turns = flat(DIALOGUE_INPUT_MASK), flat(DIALOGUE_ROLE_IDS), flat(DIALOGUE_TURN_IDS)
        outputs = run_backbone(self.backbone, tf.reshape(ids, (-1, length)), mask, training,
                               segment_ids=roles if self.role_segment_ids else None)
        pooled = cross_representations(tf.cast(outputs["sequence_output"], tf.float32), mask, roles, turns,
                                       self.window)
        names = ("self_0", "cross_0", "self_1", "cross_1")
        result = {name: tf.reshape(value, (-1, samples, value.shape[-1])) for name, value in zip(names, pooled)}
        result["embedding"] = result["self_0"][:, 0] + result["self_1"][:, 0]
        return result

    def get_config(self):
        return {**super().get_config(), "backbone": backbone_config(self.backbone), "window": self.window,
                "role_segment_ids": self.role_segment_ids}

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "backbone": backbone_from_config(config["backbone"])})
