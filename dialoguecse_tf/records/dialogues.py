"""dial2vec's training samples ("dialogues"; Liu et al., EMNLP 2022, section 3.2; the authors'
`data/generate_training.py`): a dialogue and `num_negatives` negatives made from it.

Each dialogue gives `samples_per_dialogue` samples (default 10), each with freshly drawn
negatives, as the release's `get_result` writes `samples_per_line` lines per session
(l.88-103; 10, the value its clustering files and `network.py:60` `sample_nums = 10` assume).
So one pass over the records is one release epoch: a dialogue is seen that many times, with as
many different sets of negatives. Each shard holds its records round by round (every dialogue
once, then every dialogue again with new negatives, ...), not copy after copy as the release's file:
the release's sampler reshuffles the whole file, the training stage only shuffles within a
buffer, and a prefix of the records (`max_train_examples`) stays a set of distinct dialogues.

A negative keeps one interlocutor's turns and replaces every turn of the other with an
utterance of that other role drawn uniformly, turn by turn, from all such utterances of the
corpus (of a bigger corpus, from a uniform sample of `negative_pool_size` of them; the release draws each replaced turn independently, l.72-73, from a pool that may
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
import os
import random
from typing import Any, ClassVar, Mapping

import numpy as np
import tensorflow as tf

from dialoguecse_tf.data.preprocessing import PrepStats, cap_dialogue
from dialoguecse_tf.encoder.packing import NUM_ROLES, TRUNCATIONS, pack_dialogues
from dialoguecse_tf.records.common import (FixedFeature, RecordSpec, RoundShardWriter, check_positive_int,
                                           count_unknown_pieces, write_records_info)
from dialoguecse_tf.records.streaming import (DEFAULT_NEGATIVE_POOL_SIZE, BottomK, example_rng, keyed_dialogues,
                                              shard_of, stable_hash)

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


def usable_dialogue(dialogue, min_turns: int, stats: PrepStats):
    """(turn texts, roles) of a dialogue with two interlocutors and enough turns, else None (counted)."""
    speakers = list(dict.fromkeys(turn.speaker for turn in dialogue.turns))
    if len(speakers) != NUM_ROLES:
        stats.drop("not_two_interlocutors")
        return None
    if len(dialogue.turns) < min_turns:
        stats.drop(f"fewer_than_{min_turns}_turns")
        return None
    return [turn.text for turn in dialogue.turns], [speakers.index(turn.speaker) for turn in dialogue.turns]


def usable_dialogues(dialogues, min_turns: int, stats: PrepStats) -> list:
    """(dialogue, turn texts, roles) of every dialogue with two interlocutors and enough turns."""
    usable = []
    for dialogue in dialogues:
        found = usable_dialogue(dialogue, min_turns, stats)
        if found is not None:
            usable.append((dialogue, *found))
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


def dialogue_items(key: int, dialogue, spec: "DialogueRecordSpec", min_turns: int, random_seed: int,
                   stats: PrepStats):
    """What the corpus-wide pass takes from one dialogue, None if it is not usable: its
    (texts, roles), the (role, pool item) of each turn (pools sample by the smallest
    (hash, key, turn) as `streaming.BottomK` does) and its (hash, key) for `max_dialogues`."""
    found = usable_dialogue(cap_dialogue(dialogue, spec.max_seq_length, stats), min_turns, stats)
    if found is None:
        return None
    texts, roles = found
    pool_items = [(role, (stable_hash(random_seed, RECORD_TYPE_DIALOGUES, "pool", key, i), key, i, text))
                  for i, (text, role) in enumerate(zip(texts, roles))]
    return found, pool_items, (stable_hash(random_seed, RECORD_TYPE_DIALOGUES, "sample", key), key)


def role_pools(items_by_role) -> list:
    """The utterance pool of each role from its sampled items, sorted (as both paths sort them)."""
    return [[item[3] for item in sorted(items_by_role.get(role, ()))] for role in range(NUM_ROLES)]


def dialogue_samples(key: int, texts, roles, pools, spec: "DialogueRecordSpec", keep_role: str,
                     samples_per_dialogue: int, random_seed: int) -> list:
    """(round, turn lists, role lists) of one usable dialogue's samples, one per round; its
    negatives come from its own RNG (`example_rng`)."""
    rng = example_rng(random_seed, RECORD_TYPE_DIALOGUES, key)
    return [(sample_round, [texts] + make_negatives(texts, roles, pools, spec.num_negatives, keep_role, rng),
             roles) for sample_round in range(samples_per_dialogue)]


# One graph per writer instead of hundreds of eager ops per chunk.
_pack = tf.function(pack_dialogues, reduce_retracing=True)


def serialize_samples(keyed, tokenizer, spec: "DialogueRecordSpec", random_seed: int, num_shards: int,
                      stats: PrepStats) -> list:
    """(shard, round, serialized record) of a chunk of (dialogue key, sample)."""
    texts, roles, turn_counts = [], [], []
    for _, (_, turn_lists, dialogue_roles) in keyed:
        for turns in turn_lists:
            texts.extend(turns)
            roles.extend(dialogue_roles)
            turn_counts.append(len(turns))
    packed = {name: value.numpy().reshape(len(keyed), spec.num_samples, -1)
              for name, value in _pack(tokenizer, tf.RaggedTensor.from_row_lengths(texts, turn_counts),
                                       tf.RaggedTensor.from_row_lengths(tf.constant(roles, tf.int32), turn_counts),
                                       spec.max_seq_length, spec.truncation).items()}
    first_round = np.array([sample_round == 0 for _, (sample_round, _, _) in keyed])
    # Each dialogue's own sequence once (its first round's row 0), the special tokens left out.
    own = packed["token_ids"][first_round, 0][packed["padding_mask"][first_round, 0] > 0]
    count_unknown_pieces(stats, own[(own != tokenizer.cls_id) & (own != tokenizer.sep_id)], tokenizer.unk_id)
    stats.increment("dialogues_truncated",
                    int((packed["untruncated_length"][first_round, 0, 0] > spec.max_seq_length).sum()))
    records = spec.serialize_batch({
        DIALOGUE_INPUT_IDS: packed["token_ids"],
        DIALOGUE_INPUT_MASK: packed["padding_mask"],
        DIALOGUE_ROLE_IDS: packed["role_ids"],
        DIALOGUE_TURN_IDS: packed["turn_ids"],
    })
    return [(shard_of(random_seed, RECORD_TYPE_DIALOGUES, (key, sample_round), num_shards), sample_round, record)
            for (key, (sample_round, _, _)), record in zip(keyed, records)]


def check_samples_per_dialogue(samples_per_dialogue) -> None:
    if isinstance(samples_per_dialogue, bool) or not isinstance(samples_per_dialogue, int) or samples_per_dialogue < 1:
        raise ValueError(f"samples_per_dialogue must be a positive int, got {samples_per_dialogue!r}")


def check_enough_dialogues(usable: int, min_turns: int) -> None:
    if usable < 2:
        raise ValueError(f"{usable} dialogue(s) with two interlocutors and at least {min_turns} turns; "
                         "dial2vec needs at least 2")


def write_dialogue_records(dialogues, tokenizer, output_dir: str, spec: DialogueRecordSpec,
                           keep_role: str = "random", min_dialogue_turns: int = DEFAULT_MIN_TURNS,
                           random_seed: int = 12345, num_shards: int = 1, stats: PrepStats | None = None, log=print,
                           max_dialogues: int = 0,
                           samples_per_dialogue: int = DEFAULT_SAMPLES_PER_DIALOGUE,
                           negative_pool_size: int = DEFAULT_NEGATIVE_POOL_SIZE) -> PrepStats:
    """Writes sharded dialogue records (`dialogues-*.tfrecord`) and `records_info.json`.

    `dialogues` is read twice (`streaming.keyed_dialogues`): once for each role's utterance pool
    (a uniform sample of at most `negative_pool_size` utterances, all of them in a smaller
    corpus) and for the `max_dialogues` sample, once for the records. `max_dialogues` > 0 writes
    that many dialogues, those of smallest seeded hash (a CPU run reads only a few thousand);
    the negatives still draw from the whole corpus's utterances. Every dialogue is written
    `samples_per_dialogue` times, each time with new negatives; a record goes to the shard its
    seeded hash names, and each shard holds its records round by round (`RoundShardWriter`),
    in corpus order within a round.
    """
    check_samples_per_dialogue(samples_per_dialogue)
    stats = stats if stats is not None else PrepStats()
    pools = [BottomK(negative_pool_size) for _ in range(NUM_ROLES)]
    chosen = BottomK(max_dialogues) if max_dialogues > 0 else None
    usable = 0
    for key, dialogue in keyed_dialogues(dialogues):
        items = dialogue_items(key, dialogue, spec, min_dialogue_turns, random_seed, stats)
        if items is None:
            continue
        usable += 1
        for role, item in items[1]:
            pools[role].add(item)
        if chosen is not None:
            chosen.add(items[2])
    check_enough_dialogues(usable, min_dialogue_turns)
    pools = role_pools({role: pool.items() for role, pool in enumerate(pools)})
    chosen = None if chosen is None else {key for _, key in chosen.items()}
    scratch = PrepStats()  # the first pass counted the cuts and drops
    with RoundShardWriter(os.path.join(output_dir, "dialogues"), num_shards, samples_per_dialogue) as writer:
        chunk = []
        for key, dialogue in keyed_dialogues(dialogues):
            items = dialogue_items(key, dialogue, spec, min_dialogue_turns, random_seed, scratch)
            if items is None:
                continue
            if chosen is not None and key not in chosen:
                stats.increment("dialogues_not_sampled")
                continue
            stats.increment("dialogues_written")
            chunk.extend((key, sample) for sample in dialogue_samples(key, *items[0], pools, spec, keep_role,
                                                                      samples_per_dialogue, random_seed))
            if len(chunk) >= _CHUNK:
                _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats, log)
                chunk = []
        if chunk:
            _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats, log)
    stats.increment("samples_written", writer.num_written)
    write_records_info(output_dir, spec, dialogue_records_info(stats, keep_role, min_dialogue_turns,
                                                               samples_per_dialogue, random_seed))
    log(f"[dialogues] {stats['dialogues_written']} dialogues x {samples_per_dialogue} samples, each with "
        f"{spec.num_negatives} negatives: {writer.num_written} records -> {output_dir}")
    return stats


def dialogue_records_info(stats: PrepStats, keep_role: str, min_turns: int, samples_per_dialogue: int,
                          random_seed: int) -> dict:
    return {**stats.to_dict(), "keep_role": keep_role, "min_turns": min_turns,
            "samples_per_dialogue": samples_per_dialogue, "random_seed": random_seed}


def _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats, log):
    before = writer.num_written
    for shard, sample_round, record in serialize_samples(chunk, tokenizer, spec, random_seed, writer.num_shards,
                                                         stats):
        writer.write(record, shard, sample_round)
    if writer.num_written // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
        log(f"[dialogues] {writer.num_written} records written")
