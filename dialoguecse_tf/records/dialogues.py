"""dial2vec's training samples ("dialogues"; Liu et al., EMNLP 2022, section 3.2; the authors'
`data/generate_training.py`): a dialogue and `num_negatives` negatives made from it.

Each dialogue gives `samples_per_dialogue` samples (default 10), each with freshly drawn
negatives, as the release's `get_result` writes `samples_per_line` lines per session
(l.88-103; 10, the value its clustering files and `network.py:60` `sample_nums = 10` assume).
So one pass over the records is one release epoch: a dialogue is seen that many times, with as
many different sets of negatives. The records are written round by round (every dialogue once,
then every dialogue again with new negatives, ...), not copy after copy as the release's file:
the release's sampler reshuffles the whole file, the training stage only shuffles within a
buffer, and a prefix of the records (`max_train_examples`) stays a set of distinct dialogues.

A negative keeps one interlocutor's turns and replaces every turn of the other with an
utterance of that other role drawn uniformly, turn by turn, from all such utterances of the
corpus (the release draws each replaced turn independently, l.72-73, from a pool that may
include the dialogue's own utterances, as here). Which interlocutor is kept:
* `keep_role="random"` (the default, the paper's text, L65): chosen at random per negative;
* `keep_role="released"`: always role 1 (the release keeps role "1" and replaces role "0",
  l.11-12, 63-73), here the dialogue's second speaker.

Dialogues need at least `min_dialogue_turns` turns (the release: 5, l.15, 47-50) and exactly two
interlocutors (roles 0/1 by order of first appearance); others are dropped and counted.
Each sequence is packed by `dialogue_packing` with the spec's `truncation` (by default the
first `max_seq_length` tokens, as the release's BERT path); dialogues that did not fit whole
are counted (`dialogues_truncated`). Either truncation keeps or weighs at most a turn's
first `max_seq_length` word pieces, so every utterance is first cut by `cap_text` (counted as
`utterances_capped`), which leaves such a record unchanged. Turns are counted after the corpus
stage's merging of a speaker's consecutive utterances (`--merge_speakers`, on by default; the
release counts raw turns); on SGD, whose speakers alternate, the two agree.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
from typing import Any, ClassVar, Mapping

import numpy as np
import tensorflow as tf

from dialoguecse_tf.data.preprocessing import PrepStats, cap_utterances
from dialoguecse_tf.dialogue_packing import NUM_ROLES, TRUNCATIONS, pack_dialogues, ragged_dialogues
from dialoguecse_tf.records.common import (FixedFeature, RecordSpec, ShardedRecordWriter, check_positive_int,
                                           write_records_info)

RECORD_TYPE_DIALOGUES = "dialogues"

# Dialogue (dial2vec) features: [1 + num_negatives, max_seq_length], the dialogue itself in
# row 0; `dialogue_packing` says what each holds.
DIALOGUE_INPUT_IDS = "dialogue_input_ids"
DIALOGUE_INPUT_MASK = "dialogue_input_mask"
DIALOGUE_ROLE_IDS = "dialogue_role_ids"
DIALOGUE_TURN_IDS = "dialogue_turn_ids"


@dataclasses.dataclass(frozen=True)
class DialogueRecordSpec(RecordSpec):
    """A dialogue (row 0) and its ``num_negatives`` negatives, each one packed sequence
    (``dialogue_packing``): ``dialogue_input_ids``/``_mask``, ``dialogue_role_ids`` (0/1 per
    token, the token's interlocutor) and ``dialogue_turn_ids`` (the token's turn), all
    ``[1 + num_negatives, max_seq_length]``. ``truncation`` is the packing's rule for too long
    a dialogue (``dialogue_packing.TRUNCATIONS``)."""

    record_type: ClassVar[str] = RECORD_TYPE_DIALOGUES

    max_seq_length: int
    num_negatives: int
    truncation: str = "head"

    def __post_init__(self):
        check_positive_int("DialogueRecordSpec", "max_seq_length", self.max_seq_length, 4)
        check_positive_int("DialogueRecordSpec", "num_negatives", self.num_negatives, 1)
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"DialogueRecordSpec.truncation must be one of {TRUNCATIONS}, got {self.truncation!r}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        # Records written before the spec named its truncation kept the most recent turns, the
        # only rule there was then.
        return super().from_dict({"truncation": "recent_turns", **values})

    @property
    def num_samples(self) -> int:
        return 1 + self.num_negatives

    def _features(self) -> tuple[FixedFeature, ...]:
        shape = (self.num_samples, self.max_seq_length)
        return tuple(FixedFeature(name, tf.int64, shape) for name in (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK,
                                                                       DIALOGUE_ROLE_IDS, DIALOGUE_TURN_IDS))


KEEP_ROLES = ("random", "released")
DEFAULT_MIN_TURNS = 5
DEFAULT_SAMPLES_PER_DIALOGUE = 10
_CHUNK = 64
_PROGRESS_EVERY = 2000


def usable_dialogues(dialogues, min_turns: int, stats: PrepStats) -> list:
    """(dialogue, turn texts, roles) of every dialogue with two interlocutors and enough turns."""
    usable = []
    for dialogue in dialogues:
        speakers = list(dict.fromkeys(turn.speaker for turn in dialogue.turns))
        if len(speakers) != NUM_ROLES:
            stats.drop("not_two_interlocutors")
        elif len(dialogue.turns) < min_turns:
            stats.drop(f"fewer_than_{min_turns}_turns")
        else:
            usable.append((dialogue, [turn.text for turn in dialogue.turns],
                           [speakers.index(turn.speaker) for turn in dialogue.turns]))
    return usable


def make_negatives(texts, roles, pools, num_negatives: int, keep_role: str, rng: random.Random) -> list:
    """`num_negatives` turn lists: one role's turns kept, the other's drawn from `pools[role]`."""
    if keep_role not in KEEP_ROLES:
        raise ValueError(f"keep_role must be one of {KEEP_ROLES}, got {keep_role!r}")
    negatives = []
    for _ in range(num_negatives):
        kept = rng.randrange(NUM_ROLES) if keep_role == "random" else 1
        negatives.append([text if role == kept else rng.choice(pools[role]) for text, role in zip(texts, roles)])
    return negatives


def write_dialogue_records(dialogues, tokenizer, output_dir: str, spec: DialogueRecordSpec,
                           keep_role: str = "random", min_dialogue_turns: int = DEFAULT_MIN_TURNS,
                           random_seed: int = 12345, num_shards: int = 1, stats: PrepStats | None = None, log=print,
                           max_dialogues: int = 0,
                           samples_per_dialogue: int = DEFAULT_SAMPLES_PER_DIALOGUE) -> PrepStats:
    """Writes sharded dialogue records (`dialogues-*.tfrecord`) and `records_info.json`.

    `max_dialogues` > 0 writes a seeded sample of that many dialogues (a CPU run reads only a
    few thousand); the negatives still draw from the whole corpus's utterances. Every dialogue
    is written `samples_per_dialogue` times, in rounds, each time with new negatives.
    """
    if isinstance(samples_per_dialogue, bool) or not isinstance(samples_per_dialogue, int) or samples_per_dialogue < 1:
        raise ValueError(f"samples_per_dialogue must be a positive int, got {samples_per_dialogue!r}")
    stats = stats if stats is not None else PrepStats()
    usable = usable_dialogues(cap_utterances(dialogues, spec.max_seq_length, stats), min_dialogue_turns, stats)
    if len(usable) < 2:
        raise ValueError(f"{len(usable)} dialogue(s) with two interlocutors and at least {min_dialogue_turns} turns; "
                         "dial2vec needs at least 2")
    pools = [[text for _, texts, roles in usable for text, role in zip(texts, roles) if role == r]
             for r in range(NUM_ROLES)]
    rng = random.Random(random_seed)
    if 0 < max_dialogues < len(usable):
        stats.increment("dialogues_not_sampled", len(usable) - max_dialogues)
        usable = [usable[i] for i in sorted(rng.sample(range(len(usable)), max_dialogues))]
    with ShardedRecordWriter(os.path.join(output_dir, "dialogues"), num_shards) as writer:
        for sample_round, start in itertools.product(range(samples_per_dialogue), range(0, len(usable), _CHUNK)):
            chunk = usable[start:start + _CHUNK]
            turn_lists, role_lists = [], []
            for _, texts, roles in chunk:
                for turns in [texts] + make_negatives(texts, roles, pools, spec.num_negatives, keep_role, rng):
                    turn_lists.append(turns)
                    role_lists.append(roles)
            packed = {key: value.numpy().reshape(len(chunk), spec.num_samples, -1)
                      for key, value in pack_dialogues(tokenizer, *ragged_dialogues(turn_lists, role_lists),
                                                       spec.max_seq_length, spec.truncation).items()}
            for row in range(len(chunk)):
                if sample_round == 0:
                    stats.increment("dialogues_truncated",
                                    int(packed["untruncated_length"][row, 0, 0] > spec.max_seq_length))
                writer.write(spec.serialize({
                    DIALOGUE_INPUT_IDS: packed["token_ids"][row].astype(np.int64),
                    DIALOGUE_INPUT_MASK: packed["padding_mask"][row].astype(np.int64),
                    DIALOGUE_ROLE_IDS: packed["role_ids"][row].astype(np.int64),
                    DIALOGUE_TURN_IDS: packed["turn_ids"][row].astype(np.int64),
                }))
            if writer.num_written // _PROGRESS_EVERY > (writer.num_written - len(chunk)) // _PROGRESS_EVERY:
                log(f"[dialogues] {writer.num_written} records written")
    stats.increment("dialogues_written", len(usable))
    stats.increment("samples_written", writer.num_written)
    write_records_info(output_dir, spec, {**stats.to_dict(), "keep_role": keep_role,
                                          "min_turns": min_dialogue_turns,
                                          "samples_per_dialogue": samples_per_dialogue,
                                          "random_seed": random_seed})
    log(f"[dialogues] {len(usable)} dialogues x {samples_per_dialogue} samples, each with {spec.num_negatives} "
        f"negatives: {writer.num_written} records -> {output_dir}")
    return stats
