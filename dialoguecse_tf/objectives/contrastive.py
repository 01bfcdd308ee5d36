"""What the objectives trained on contrastive records share: record checks, turn and
negative selection, and the cosine metrics every one of them logs."""

import dataclasses
import os

import tensorflow as tf

from dialoguecse_tf.config_fields import field
from dialoguecse_tf.objectives.base import Objective
from dialoguecse_tf.records.spec import RECORDS_INFO_FILE
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET,
                                                RECORD_TYPE_CONTRASTIVE)


@dataclasses.dataclass(frozen=True)
class ContrastiveOptions:
    num_context_turns: int = field(3, "Context turns (paper: 3); at most what the records carry.", minimum=1)
    num_negatives: int = field(9, "Negatives per response (paper: 9); at most what the records carry.",
                                   minimum=1)
    num_frozen_layers: int = field(6, "Bottom BERT layers kept frozen, with the embeddings (paper: 6 of BERT-base's "
                                   "12). A count, not a fraction, in the paper presets too: a run freezing every "
                                   "layer is refused, naming the half to pass (3 for a 6-layer MiniLM).", minimum=0)


def select_context_turns(batch: dict, num_context_turns: int) -> dict:
    """Keeps each record's `num_context_turns` context turns nearest to the response.

    Records written with more turns than a run uses (e.g. 5 for the paper's Figure 2 sweep)
    serve every smaller setting: turns are ranked by distance from the response, the turn
    before winning a tie, and the kept ones stay in dialogue order.

    Args:
      batch: a batched contrastive records' dict, its turn features of shape [B, T, ...]
        (`context_input_ids` and `context_input_mask` [B, T, L], `context_turn_mask` and
        `context_turn_offset` [B, T]).
      num_context_turns: int, T' <= T.

    Returns:
      dict of the same keys, the turn features of shape [B, T', ...].
    """
    offsets = batch[CONTEXT_TURN_OFFSET]
    if offsets.shape[1] == num_context_turns:
        return batch
    distance = tf.abs(offsets) * 2 + tf.cast(offsets > 0, offsets.dtype)
    distance = tf.where(batch[CONTEXT_TURN_MASK] > 0, distance, tf.reduce_max(distance) + 1000)
    _, nearest = tf.math.top_k(-distance, k=num_context_turns)
    nearest = tf.sort(nearest, axis=-1)
    turn_features = (CONTEXT_INPUT_IDS, CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK,
                     CONTEXT_TURN_OFFSET)
    return {**batch, **{name: tf.gather(batch[name], nearest, batch_dims=1) for name in turn_features}}


def select_side_turns(batch: dict, num_turns: int, records_turns: int) -> dict:
    """Keeps the `num_turns` turns nearest to the response on each side of `"sides"` records
    carrying `records_turns` per side: the last of the left slots and the first of the right.

    Args:
      batch: a batched contrastive records' dict, its turn features of shape
        [B, 2 * records_turns, ...] (left slots, then right slots).
      num_turns: int <= records_turns.
      records_turns: int, the turns per side the records carry.

    Returns:
      dict of the same keys, the turn features of shape [B, 2 * num_turns, ...].
    """
    if num_turns == records_turns:
        return batch
    keep = tf.range(records_turns - num_turns, records_turns + num_turns)
    turn_features = (CONTEXT_INPUT_IDS, CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK,
                     CONTEXT_TURN_OFFSET)
    return {**batch, **{name: tf.gather(batch[name], keep, axis=1) for name in turn_features}}


def select_negatives(batch: dict, num_negatives: int) -> dict:
    """Keeps the true response and the first `num_negatives` negatives of each record.

    Records may carry more negatives than a run uses (the authors' files carry 49), so one
    set of records serves every point of the paper's negatives sweep (Table 4).

    Args:
      batch: a batched contrastive records' dict, `candidate_input_ids` and
        `candidate_input_mask` of shape [B, K, L].
      num_negatives: int, at most K - 1.

    Returns:
      dict of the same keys, the candidate features of shape [B, num_negatives + 1, L].
    """
    keep = num_negatives + 1
    return {
        **batch,
        CANDIDATE_INPUT_IDS: batch[CANDIDATE_INPUT_IDS][:, :keep],
        CANDIDATE_INPUT_MASK: batch[CANDIDATE_INPUT_MASK][:, :keep],
    }


def candidate_metrics(scores, cosines) -> dict:
    """Per-example terms of the per-step logs of a [B, K] candidate layout, the positive at index 0
    ({name: [B]}, `Objective.example_losses`' metric terms).

    `positive_ranked_first` uses the scores the loss ranks by; the cosine means (positive,
    negatives and their gap) use `cosines`, the cosine similarity of the two embeddings the
    objective compares, so models with different scorers are logged on one scale.

    Args:
      scores: float Tensor of shape [B, K], what the loss ranks by.
      cosines: float Tensor of shape [B, K].

    Returns:
      {"positive_ranked_first", "positive_cosine", "negative_cosine", "cosine_gap"}: float
      Tensors of shape [B].
    """
    positive = cosines[:, 0]
    negative = tf.reduce_mean(cosines[:, 1:], axis=-1)
    return {
        # Strictly first: a tie is no win, or a collapsed encoder (every score equal) would read 1.0.
        "positive_ranked_first": tf.cast(scores[:, 0] > tf.reduce_max(scores[:, 1:], axis=-1), tf.float32),
        "positive_cosine": positive,
        "negative_cosine": negative,
        "cosine_gap": positive - negative,
    }


class ContrastiveObjective(Objective):
    """Base of the objectives that rank a response against negatives given its context."""

    record_type = RECORD_TYPE_CONTRASTIVE
    options_class = ContrastiveOptions
    training_defaults = {"train_batch_size": 20, "learning_rate": 5e-5}

    # "nearest": the context_turns() turns nearest to the response, either side; "sides":
    # num_context_turns on each side, kept apart (needs records of that layout).
    context_selection = "nearest"

    def context_turns(self) -> int:
        """The context turns a batch keeps (per side with `context_selection` "sides")."""
        return self.options.num_context_turns

    def check_records(self, spec, records_dir: str) -> None:
        """Raises ValueError for records of another context layout than this objective reads,
        or carrying fewer negatives or context turns than the options ask for."""
        info = os.path.join(records_dir, RECORDS_INFO_FILE)
        if self.context_selection == "sides" and spec.context_layout != "sides":
            raise ValueError(
                f"{self.name} ({self.describe()}) reads left and right contexts apart, but the records in "
                f"{records_dir} have context_layout={spec.context_layout!r} (see {info}); write them with "
                "data_prep/create_contrastive_data.py --context_layout=sides"
            )
        for name in ("num_negatives", "num_context_turns"):
            if getattr(self.options, name) > getattr(spec, name):
                raise ValueError(
                    f"{name}={getattr(self.options, name)} but the records in {records_dir} carry only "
                    f"{getattr(spec, name)} (see {info})"
                )
        self._records_spec = spec

    def describe(self) -> str:
        return "contrastive"

    def prepare_batch(self, batch: dict) -> dict:
        """Keeps `context_turns()` turns (nearest, or per side) and `num_negatives` negatives."""
        if self.context_selection == "sides":
            batch = select_side_turns(batch, self.context_turns(), self._records_spec.num_context_turns)
        else:
            batch = select_context_turns(batch, self.context_turns())
        return select_negatives(batch, self.options.num_negatives)

    def metadata(self) -> dict:
        return dataclasses.asdict(self.options)
