"""A whole dialogue as one token sequence with each token's interlocutor: the one packing rule
dial2vec's records, `DialogueEncoder` and the exported dialogue signature share.

Layout: `[CLS] u_1 [SEP] u_2 [SEP] ... u_n [SEP] [PAD] ...`, the BERT path of dial2vec's
released `data/data_provider.py` (l.217-232: [CLS], turns separated by [SEP]) with a [SEP]
closing the last turn too, so every turn ends in one. `separators=False` leaves every [SEP]
out, `[CLS] u_1 u_2 ... u_n`, as the release packs a dialogue with `--use_sep_token False`
(l.228-232), the setting of its PLM baselines (`scripts/inference/run_bert.sh`). Per token:
* `role_ids`: the turn's role, 0 or 1 (the [CLS] takes the first turn's role, a [SEP] its
  turn's, padding 0), as the release's `role_ids` (l.218-232). Whether a model also feeds
  them to BERT as token types is the model's choice: the release's BERT path passes all-zero
  `token_type_ids` (l.250) and reads roles only through its role masks; only its (unreleased)
  PLATO backbone receives roles, through a role embedding of its own;
* `turn_ids`: the index of the token's turn among the kept turns (the [CLS]: 0), which
  dial2vec's window over turns reads.

Too long a dialogue is cut by `truncation`:
* `"head"` (the default): the sequence keeps its first `max_seq_length` tokens, as the
  release's BERT path (l.242-244), so the end of the dialogue is lost, possibly mid-turn;
* `"recent_turns"`: the oldest whole turns are dropped until the rest fits; when even the last
  turn alone does not fit, it is kept and cut to its first `max_seq_length - 2` word pieces.
  (The release's PLATO path keeps the last 15 turns and then cuts the sequence's end, l.342,
  362-366; that is not reproduced.)
`untruncated_length` says how many tokens the whole dialogue would have taken.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from dialoguecse_tf.config_fields import NUM_ROLES, TRUNCATIONS


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


def pack_dialogues(tokenizer, turns: tf.RaggedTensor, roles: tf.RaggedTensor, max_seq_length: int,
                   truncation: str = "head", separators: bool = True) -> dict:
    """[B, (T)] turn strings and their [B, (T)] roles -> int32 `token_ids`, `role_ids`, `turn_ids`
    and `padding_mask`, each [B, max_seq_length], and `untruncated_length` [B] (module docstring)."""
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")
    length = int(max_seq_length)
    tf.debugging.assert_positive(turns.row_lengths(), message="every dialogue needs at least one turn")
    pieces = tf.RaggedTensor.from_row_splits(tokenizer.tokenize(turns.flat_values), turns.row_splits)
    # Tokens a turn costs: its pieces and its [SEP].
    cost = tf.cast(pieces.row_lengths(axis=2), tf.int64) + int(separators)
    roles = tf.cast(roles, tf.int64)
    if truncation == "recent_turns":
        # A turn is kept while it and every later turn fit beside the [CLS].
        flat_cost = cost.flat_values
        before = tf.cumsum(flat_cost, exclusive=True)
        rows = cost.value_rowids()
        before_in_row = before - tf.gather(tf.gather(before, cost.row_starts()), rows)
        row_total = tf.gather(tf.reduce_sum(cost, axis=1), rows)
        from_here_on = row_total - before_in_row
        is_last = tf.equal(_row_local_index(cost), tf.gather(cost.row_lengths(), rows) - 1)
        keep = tf.RaggedTensor.from_row_splits(tf.logical_or(from_here_on <= length - 1, is_last), cost.row_splits)
        pieces = tf.ragged.boolean_mask(pieces, keep)[:, :, :length - 1 - int(separators)]
        roles = tf.ragged.boolean_mask(roles, keep)

    turn_tokens = pieces.values  # [turns, (pieces)]
    if separators:
        sep = tf.fill([turn_tokens.nrows(), 1], tf.constant(tokenizer.sep_id, tf.int64))
        turn_tokens = tf.concat([turn_tokens, sep], axis=1)
    tokens_per_turn = turn_tokens.row_lengths()
    role_tokens = tf.repeat(roles.flat_values, tokens_per_turn)
    turn_index = tf.repeat(_row_local_index(roles), tokens_per_turn)

    def dialogue_rows(flat_values):
        per_turn = tf.RaggedTensor.from_row_lengths(flat_values, tokens_per_turn)
        return tf.RaggedTensor.from_row_splits(per_turn, roles.row_splits).merge_dims(1, 2)

    batch = roles.nrows()
    first_role = tf.gather(roles.flat_values, roles.row_starts())[:, None]
    ids = tf.concat([tf.fill([batch, 1], tf.constant(tokenizer.cls_id, tf.int64)), dialogue_rows(turn_tokens.values)],
                    axis=1)
    role_ids = tf.concat([first_role, dialogue_rows(role_tokens)], axis=1)
    turn_ids = tf.concat([tf.zeros([batch, 1], tf.int64), dialogue_rows(turn_index)], axis=1)
    # `to_tensor` with a fixed width keeps each row's first `length` values: the head truncation.
    shape = [None, length]
    return {
        "token_ids": tf.cast(ids.to_tensor(0, shape=shape), tf.int32),
        "role_ids": tf.cast(role_ids.to_tensor(0, shape=shape), tf.int32),
        "turn_ids": tf.cast(turn_ids.to_tensor(0, shape=shape), tf.int32),
        "padding_mask": tf.cast(tf.ones_like(ids).to_tensor(0, shape=shape), tf.int32),
        "untruncated_length": tf.cast(1 + tf.reduce_sum(cost, axis=1), tf.int32),
    }


def ragged_dialogues(dialogues: Sequence[Sequence[str]], roles: Sequence[Sequence[int]]):
    """Python turn lists and role lists -> the two [B, (T)] ragged tensors `pack_dialogues` takes."""
    if len(dialogues) != len(roles) or any(len(t) != len(r) for t, r in zip(dialogues, roles)):
        raise ValueError("every dialogue needs one role per turn")
    if any(not turns for turns in dialogues):
        raise ValueError("a dialogue has no turn")
    return (tf.ragged.constant([list(t) for t in dialogues], dtype=tf.string),
            tf.ragged.constant([list(r) for r in roles], dtype=tf.int32))
