"""The one inference path for whole dialogues, beside `SentenceEncoder` for sentences:
turns and speakers -> `packing` -> BERT -> dialogue pooling.

Evaluation of every dialogue model, its baselines and the export's dialogue signature embed
through `DialogueEncoder`, so a number in a results table and a served vector agree. A
dial2vec encoder records how it read dialogues in training (its truncation, and whether roles
were BERT's token types); `from_checkpoint` and `dialogue_settings` read that record, so a
dialogue is embedded as the model was trained on it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dialoguecse_tf.data.dialogue import Dialogue
from dialoguecse_tf.encoder.backbone import run_backbone, with_precision
from dialoguecse_tf.encoder.packing import TRUNCATIONS, pack_dialogues, ragged_dialogues, speaker_roles
from dialoguecse_tf.encoder.pooling import DIALOGUE_POOLING_MODES, interlocutor_mean, masked_mean
from dialoguecse_tf.encoder.sentence import encode_in_batches
from dialoguecse_tf.precision import DEFAULT_PRECISION, check_precision, precision_of


def dialogue_turns(dialogue) -> tuple[list[str], list[int]]:
    """The turn texts and speaker roles of one dialogue.

    Args:
      dialogue: a `Dialogue`, or a sequence of (speaker, text) pairs.

    Returns:
      (texts, roles): list of T str, and list of T int, 0 or 1, speakers numbered by order of
      first appearance.

    Raises:
      ValueError: for a dialogue with no turn or without exactly two speakers.
    """
    if isinstance(dialogue, Dialogue):
        pairs = [(turn.speaker, turn.text) for turn in dialogue.turns]
        where = f"dialogue {dialogue.dialogue_id}"
    else:
        pairs = [tuple(pair) for pair in dialogue]
        where = "dialogue"
    if not pairs:
        raise ValueError(f"{where}: no turn")
    return [text for _, text in pairs], speaker_roles([speaker for speaker, _ in pairs], where)


def dialogue_settings(metadata: dict) -> dict:
    """`truncation` and `role_segment_ids` of `DialogueEncoder` for a checkpoint with this
    metadata: as a dial2vec run trained it (its options, `objectives/dial2vec.py`); for any
    other checkpoint, the release's BERT path (the first tokens, all-zero token types).

    Args:
      metadata: dict, a loaded checkpoint's metadata (`LoadedCheckpoint.metadata`).

    Returns:
      {"truncation": str, "role_segment_ids": bool}, keyword arguments of `DialogueEncoder`.
    """
    if metadata.get("objective") != "dial2vec":
        return {"truncation": "head", "role_segment_ids": False}
    # A dial2vec encoder written before these options existed was trained with roles as token
    # types on records that kept the most recent turns, the only way there was then.
    return {"truncation": metadata.get("truncation", "recent_turns"),
            "role_segment_ids": metadata.get("role_segment_ids", True)}


class DialogueEncoder(tf.Module):
    """A tokenizer and a BERT backbone that embed whole dialogues (`pooling`: "interlocutor",
    dial2vec's sum of the two roles' token means, or "mean" over all tokens). `truncation` and
    `separators` are `packing`'s; `role_segment_ids` feeds the roles as BERT's token
    types (default: all zero, as the release's BERT path). In every precision the vectors are
    float32: BERT's outputs are cast to float32 before pooling.

    Example:
      >>> encoder = DialogueEncoder.from_checkpoint("runs/dial2vec/encoder", max_seq_length=256)
      >>> vectors = encoder.encode_dialogues([[("user", "where is my order"), ("agent", "let me check")]])
      >>> vectors.shape  # (1, encoder.dimension), float32
    """

    def __init__(self, backbone, tokenizer, max_seq_length: int = 512, pooling: str = "interlocutor",
                 truncation: str = "head", role_segment_ids: bool = False, separators: bool = True,
                 name: str = "dialogue_encoder", precision: str | None = None):
        """Constructor for DialogueEncoder.

        Args:
          backbone: keras_hub.models.BertBackbone, e.g. `load_checkpoint(...).backbone`.
          tokenizer: encoder.tokenization.Tokenizer matching the backbone's vocabulary.
          max_seq_length: int, the packed dialogue's length, at most the backbone's positions.
          pooling: "interlocutor" or "mean"; `DIALOGUE_POOLING_MODES`.
          truncation: "head" (the first tokens) or "recent_turns"; `packing.TRUNCATIONS`.
          role_segment_ids: bool, whether the roles are fed as BERT's token types.
          separators: bool, whether a [SEP] follows each turn.
          name: str, the tf.Module's name.
          precision: None, the backbone's own; or one of `precision.PRECISIONS`, checked
            against this machine, the backbone then copied into it unless it computes in it
            already (`backbone.with_precision`).

        Raises:
          ValueError: for an unknown `pooling` or `truncation`, a `max_seq_length` beyond
            the backbone's positions, or a `precision` this machine does not run.
        """
        super().__init__(name=name)
        if pooling not in DIALOGUE_POOLING_MODES:
            raise ValueError(f"dialogue pooling must be one of {DIALOGUE_POOLING_MODES}, got {pooling!r}")
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
        if max_seq_length > backbone.max_sequence_length:
            raise ValueError(f"max_seq_length {max_seq_length} exceeds the backbone's {backbone.max_sequence_length} "
                             "positions")
        if precision is not None:
            check_precision(precision)
            backbone = with_precision(backbone, precision)
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.max_seq_length = int(max_seq_length)
        self.pooling = pooling
        self.truncation = truncation
        self.role_segment_ids = bool(role_segment_ids)
        self.separators = bool(separators)
        self._embed_fn = tf.function(self._embed, reduce_retracing=True)

    @classmethod
    def from_checkpoint(cls, path: str, max_seq_length: int = 512, pooling: str = "interlocutor",
                        precision: str = DEFAULT_PRECISION, **kwargs):
        """The checkpoint's encoder, reading dialogues as its training did (`dialogue_settings`).

        Args:
          path: str, a checkpoint folder of any form `load_checkpoint` reads.
          max_seq_length: int, the packed dialogue's length.
          pooling: "interlocutor" or "mean".
          precision: one of `precision.PRECISIONS`: "bfloat16" computes in bfloat16 (float32
            vectors still), where this machine has bfloat16 arithmetic.
          **kwargs: `load_checkpoint`'s `do_lower_case` and `vocab_file`.

        Returns:
          DialogueEncoder with the checkpoint's backbone, tokenizer, truncation and
          `role_segment_ids`.

        Raises:
          FileNotFoundError: if `path` does not exist.
          ValueError: if `path` is no checkpoint, does not match its config, a setting is
            invalid (see the constructor), or this machine does not run `precision`.
        """
        from dialoguecse_tf.encoder.checkpoints import load_checkpoint

        loaded = load_checkpoint(path, max_seq_length=max_seq_length, precision=precision, **kwargs)
        return cls(loaded.backbone, loaded.tokenizer, max_seq_length, pooling, **dialogue_settings(loaded.metadata))

    def describe(self) -> str:
        """What the vectors are, for results tables."""
        cut = "its first tokens kept" if self.truncation == "head" else "its most recent turns kept"
        layout = "[CLS] u_1 [SEP] u_2 [SEP] ..." if self.separators else "[CLS] u_1 u_2 ... (no [SEP])"
        types = "roles as token types" if self.role_segment_ids else "token types 0"
        pooled = ("the mean of each interlocutor's token outputs, the two summed" if self.pooling == "interlocutor"
                  else "the mean of all token outputs")
        return (f"the dialogue as one sequence {layout} of at most {self.max_seq_length} tokens ({cut}; {types}): "
                f"{pooled}")

    @property
    def dimension(self) -> int:
        return self.backbone.hidden_dim

    @property
    def precision(self) -> str:
        """The precision the backbone computes in (`precision.PRECISIONS`)."""
        return precision_of(self.backbone)

    def pool(self, sequence_output, padding_mask, roles):
        """This encoder's dialogue pooling.

        Args:
          sequence_output: float Tensor of shape [B, L, D].
          padding_mask: Tensor of shape [B, L], 1 for a real token.
          roles: int Tensor of shape [B, L], each token's role, 0 or 1.

        Returns:
          Tensor of shape [B, D].
        """
        if self.pooling == "mean":
            return masked_mean(sequence_output, padding_mask)
        return interlocutor_mean(sequence_output, padding_mask, roles)

    def _embed(self, turns, roles):
        packed = pack_dialogues(self.tokenizer, turns, roles, self.max_seq_length, self.truncation, self.separators)
        # Cut the columns that are padding in every row: the vectors stay the same.
        length = tf.maximum(tf.reduce_max(tf.reduce_sum(packed["padding_mask"], axis=1)), 1)
        ids, mask, role_ids = (packed[key][:, :length] for key in ("token_ids", "padding_mask", "role_ids"))
        outputs = run_backbone(self.backbone, ids, mask,
                               segment_ids=role_ids if self.role_segment_ids else None)["sequence_output"]
        return self.pool(tf.cast(outputs, tf.float32), mask, role_ids)

    def embed_dialogues(self, turns: tf.RaggedTensor, roles: tf.RaggedTensor):
        """Embeds a batch of dialogues (a graph function).

        Args:
          turns: str RaggedTensor of shape [B, (T)], each dialogue's turn texts.
          roles: int RaggedTensor of shape [B, (T)], each turn's role, 0 or 1.

        Returns:
          float32 Tensor of shape [B, D].
        """
        return self._embed_fn(turns, tf.cast(roles, tf.int32))

    def encode_utterances(self, texts, batch_size: int = 64) -> np.ndarray:
        """Embeds each text as a one-turn dialogue, packed and pooled as this encoder packs and
        pools dialogues (with `separators=False` and mean pooling: "[CLS] u" and the mean of all
        its token outputs).

        Args:
          texts: iterable of N str.
          batch_size: int, texts per forward pass, positive.

        Returns:
          np.ndarray of float32, shape [N, D], in input order.

        Raises:
          ValueError: if `batch_size` is not positive.
        """
        texts = list(texts)

        def embed_batch(batch):
            turns, roles = ragged_dialogues([[texts[i]] for i in batch], [[0] for _ in batch])
            return self.embed_dialogues(turns, roles).numpy()

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors = encode_in_batches(order, embed_batch, self.dimension, batch_size, sort_by_length=False)
        result = np.zeros_like(vectors)
        result[order] = vectors
        return result

    def encode_dialogues(self, dialogues, batch_size: int = 16, verbose: bool = False) -> np.ndarray:
        """Embeds whole dialogues in batches.

        Speakers become roles 0/1 by order of first appearance.

        Args:
          dialogues: iterable of N `Dialogue`s or sequences of (speaker, text) pairs.
          batch_size: int, dialogues per forward pass, positive.
          verbose: bool, whether progress is reported per batch.

        Returns:
          np.ndarray of float32, shape [N, D], row i the vector of dialogue i.

        Raises:
          ValueError: naming the dialogue, for one with no turn or without exactly two
            speakers; or if `batch_size` is not positive.
        """
        items = [dialogue_turns(dialogue) for dialogue in dialogues]

        def embed_batch(batch):
            turns, roles = ragged_dialogues([items[i][0] for i in batch], [items[i][1] for i in batch])
            return self.embed_dialogues(turns, roles).numpy()

        # Sorted by turn count (a proxy of length) so a batch carries little padding.
        order = sorted(range(len(items)), key=lambda i: -len(items[i][0]))
        vectors = encode_in_batches(order, embed_batch, self.dimension, batch_size, sort_by_length=False,
                                    verbose=verbose)
        result = np.zeros_like(vectors)
        result[order] = vectors
        return result
