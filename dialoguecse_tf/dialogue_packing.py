"""A whole dialogue as one token sequence with each token's interlocutor: the one packing rule
dial2vec's records, `DialogueEncoder` and the exported dialogue signature share.

Layout: `[CLS] u_1 [SEP] u_2 [SEP] ... u_n [SEP] [PAD] ...`, the BERT path of dial2vec's
released `data/data_provider.py` (l.177-281: [CLS], turns separated by [SEP]) with a [SEP]
closing the last turn too, so every turn ends in one. Per token:
* `segment_ids`: the turn's role, 0 or 1 (the [CLS] takes the first kept turn's role,
  padding 0). BERT's token-type embedding carries the role, so a Google or HuggingFace BERT
  checkpoint loads unchanged. This differs from the release: its BERT path passes all-zero
  token types, and only its (unreleased) PLATO backbone receives roles, through a role
  embedding of its own. With the embeddings frozen (dial2vec freezes them with the bottom
  layers), the role-1 embedding stays the pretrained second token type;
* `turn_ids`: the index of the token's turn among the kept turns (the [CLS]: 0), which
  dial2vec's window over turns reads.

Too long a dialogue keeps its MOST RECENT turns: the oldest whole turns are dropped until the
rest fits; when even the last turn alone does not fit, it is kept and cut to its first
`max_seq_length - 2` word pieces. (The release keeps the last 15 turns and then cuts the
token sequence's end, losing the most recent turns; it also misaligns roles in dialogues of
more than 15 turns. Neither is reproduced.)
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

NUM_ROLES = 2


def speaker_roles(speakers: Sequence, where: str = "dialogue") -> list[int]:
    """Roles 0/1 by order of first appearance; raises ValueError unless exactly two speakers."""
    order = list(dict.fromkeys(speakers))
    if len(order) != NUM_ROLES:
        raise ValueError(f"{where}: dial2vec needs exactly two interlocutors, found {len(order)} ({order[:4]})")
    return [order.index(speaker) for speaker in speakers]


def _row_local_index(ragged: tf.RaggedTensor) -> tf.Tensor:
    """For each flat value of a 2-D ragged tensor, its position within its row."""
    rows = ragged.value_rowids()
    return tf.range(tf.shape(rows, out_type=rows.dtype)[0]) - tf.gather(ragged.row_starts(), rows)


def pack_dialogues(tokenizer, turns: tf.RaggedTensor, roles: tf.RaggedTensor, max_seq_length: int) -> dict:
    """[B, (T)] turn strings and their [B, (T)] roles -> int32 `token_ids`, `segment_ids`
    (roles), `turn_ids` and `padding_mask`, each [B, max_seq_length] (module docstring)."""
    length = int(max_seq_length)
    tf.debugging.assert_positive(turns.row_lengths(), message="every dialogue needs at least one turn")
    pieces = tf.RaggedTensor.from_row_splits(tokenizer.tokenize(turns.flat_values), turns.row_splits)
    piece_counts = tf.cast(pieces.row_lengths(axis=2), tf.int64)
    # Tokens a turn costs (its pieces and its [SEP]); a turn is kept while it and every later
    # turn fit beside the [CLS].
    cost = piece_counts + 1
    flat_cost = cost.flat_values
    before = tf.cumsum(flat_cost, exclusive=True)
    rows = cost.value_rowids()
    before_in_row = before - tf.gather(tf.gather(before, cost.row_starts()), rows)
    row_total = tf.gather(tf.reduce_sum(cost, axis=1), rows)
    from_here_on = row_total - before_in_row
    is_last = tf.equal(_row_local_index(cost), tf.gather(cost.row_lengths(), rows) - 1)
    keep_flat = tf.logical_or(from_here_on <= length - 1, is_last)
    keep = tf.RaggedTensor.from_row_splits(keep_flat, cost.row_splits)
    kept_pieces = tf.ragged.boolean_mask(pieces, keep)[:, :, :length - 2]
    kept_roles = tf.ragged.boolean_mask(tf.cast(roles, tf.int64), keep)

    turn_tokens = kept_pieces.values  # [kept turns, (pieces)]
    sep = tf.fill([turn_tokens.nrows(), 1], tf.constant(tokenizer.sep_id, tf.int64))
    turn_tokens = tf.concat([turn_tokens, sep], axis=1)
    tokens_per_turn = turn_tokens.row_lengths()
    role_tokens = tf.repeat(kept_roles.flat_values, tokens_per_turn)
    turn_index = tf.repeat(_row_local_index(kept_roles), tokens_per_turn)

    def dialogue_rows(flat_values):
        per_turn = tf.RaggedTensor.from_row_lengths(flat_values, tokens_per_turn)
        return tf.RaggedTensor.from_row_splits(per_turn, kept_roles.row_splits).merge_dims(1, 2)

    batch = kept_roles.nrows()
    first_role = tf.gather(kept_roles.flat_values, kept_roles.row_starts())[:, None]
    ids = tf.concat([tf.fill([batch, 1], tf.constant(tokenizer.cls_id, tf.int64)), dialogue_rows(turn_tokens.values)],
                    axis=1)
    segments = tf.concat([first_role, dialogue_rows(role_tokens)], axis=1)
    turn_ids = tf.concat([tf.zeros([batch, 1], tf.int64), dialogue_rows(turn_index)], axis=1)
    shape = [None, length]
    return {
        "token_ids": tf.cast(ids.to_tensor(0, shape=shape), tf.int32),
        "segment_ids": tf.cast(segments.to_tensor(0, shape=shape), tf.int32),
        "turn_ids": tf.cast(turn_ids.to_tensor(0, shape=shape), tf.int32),
        "padding_mask": tf.cast(tf.ones_like(ids).to_tensor(0, shape=shape), tf.int32),
    }


def ragged_dialogues(dialogues: Sequence[Sequence[str]], roles: Sequence[Sequence[int]]):
    """Python turn lists and role lists -> the two [B, (T)] ragged tensors `pack_dialogues` takes."""
    if len(dialogues) != len(roles) or any(len(t) != len(r) for t, r in zip(dialogues, roles)):
        raise ValueError("every dialogue needs one role per turn")
    if any(not turns for turns in dialogues):
        raise ValueError("a dialogue has no turn")
    return (tf.ragged.constant([list(t) for t in dialogues], dtype=tf.string),
            tf.ragged.constant([list(r) for r in roles], dtype=tf.int32))
