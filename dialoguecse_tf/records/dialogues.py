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
import functools
import random
from typing import Any, ClassVar, Mapping

import numpy as np
from absl import logging

from dialoguecse_tf.config_fields import NUM_ROLES, TRUNCATIONS, field
from dialoguecse_tf.data.preprocessing import PrepStats, cap_dialogue
from dialoguecse_tf.records.record_type import RecordType
from dialoguecse_tf.records.spec import INT64, FixedFeature, RecordSpec, check_positive_int, write_records_info
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
    a dialogue (``config_fields.TRUNCATIONS``, which `encoder.packing` implements)."""

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
        return tuple(FixedFeature(name, INT64, shape) for name in (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK,
                                                                       DIALOGUE_ROLE_IDS, DIALOGUE_TURN_IDS))


KEEP_ROLES = ("random", "released")
DEFAULT_MIN_TURNS = 5
DEFAULT_SAMPLES_PER_DIALOGUE = 10


@dataclasses.dataclass(frozen=True)
class DialogueSettings:
    """Every setting of the dialogue records' data prep (`create_dialogue_data.py`'s flags)."""

    max_seq_length: int = field(512, "Tokens per dialogue (dial2vec: 512); see --truncation.")
    truncation: str = field("head", "Too long a dialogue keeps its first max_seq_length tokens (head: the release's "
                            "BERT path) or its most recent whole turns (recent_turns); train with the same "
                            "--truncation.", choices=TRUNCATIONS)
    num_negatives: int = field(9, "Negatives per dialogue (dial2vec: 9).")
    keep_role: str = field("random", "Which interlocutor a negative keeps: random per negative (the paper) or always "
                           "the second speaker (the released code's role 1).", choices=KEEP_ROLES)
    min_dialogue_turns: int = field(DEFAULT_MIN_TURNS, "Drop dialogues with fewer turns (dial2vec: 5).")
    max_dialogues: int = field(0, "Write a seeded sample of this many dialogues (0: all); negatives still draw from "
                               "the whole corpus.")
    samples_per_dialogue: int = field(DEFAULT_SAMPLES_PER_DIALOGUE, "Samples written per dialogue, each with freshly "
                                      "drawn negatives (the release's samples_per_line: 10), so one pass over the "
                                      "records is one release epoch.")
    random_seed: int = field(12345, "Seed of the sample and of the negatives.")
    num_shards: int = field(1, "Number of output files; a record goes to the one its seeded hash names.")
    negative_pool_size: int = field(DEFAULT_NEGATIVE_POOL_SIZE, "Each role's replacement utterances are drawn from a "
                                    "uniform sample of this many of the corpus' utterances of that role (all of them "
                                    "in a smaller corpus), which bounds the memory.")

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


@functools.cache
def _pack():
    """`packing.pack_dialogues` as one graph per process instead of hundreds of eager ops per chunk."""
    import tensorflow as tf

    from dialoguecse_tf.encoder.packing import pack_dialogues

    return tf.function(pack_dialogues, reduce_retracing=True)


def serialize_samples(keyed, tokenizer, spec: "DialogueRecordSpec", random_seed: int, num_shards: int,
                      stats: PrepStats) -> list:
    """(shard, round, serialized record) of a chunk of (dialogue key, sample)."""
    import tensorflow as tf

    from dialoguecse_tf.encoder.tokenization import count_unknown_pieces

    texts, roles, turn_counts = [], [], []
    for _, (_, turn_lists, dialogue_roles) in keyed:
        for turns in turn_lists:
            texts.extend(turns)
            roles.extend(dialogue_roles)
            turn_counts.append(len(turns))
    packed = {name: value.numpy().reshape(len(keyed), spec.num_samples, -1)
              for name, value in _pack()(tokenizer, tf.RaggedTensor.from_row_lengths(texts, turn_counts),
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
                           random_seed: int = 12345, num_shards: int = 1, stats: PrepStats | None = None,
                           max_dialogues: int = 0,
                           samples_per_dialogue: int = DEFAULT_SAMPLES_PER_DIALOGUE,
                           negative_pool_size: int = DEFAULT_NEGATIVE_POOL_SIZE) -> PrepStats:
    """Writes sharded dialogue records (`dialogues-*.tfrecord`) and `records_info.json`.

    `dialogues` is read twice (`streaming.keyed_dialogues`): once for each role's utterance pool
    (a uniform sample of at most `negative_pool_size` utterances, all of them in a smaller
    corpus) and for the `max_dialogues` sample, once for the records. The negatives still draw
    from the whole corpus's utterances when only a sample of dialogues is written. A record goes
    to the shard its seeded hash names, and each shard holds its records round by round
    (`RoundShardWriter`), in corpus order within a round.

    Args:
      dialogues: the corpus, read twice: a `source.DialogueSource`, or a list of dialogues.
      tokenizer: the `Tokenizer` of the encoder to train.
      output_dir: the records' folder.
      spec: the records' spec: negatives, sequence length and truncation.
      keep_role: which interlocutor a negative keeps (`KEEP_ROLES`).
      min_dialogue_turns: dialogues with fewer turns are dropped.
      random_seed: the seed of the sample, the negatives and the shards.
      num_shards: the number of shard files.
      stats: the `PrepStats` to count into; a new one if None.
      max_dialogues: > 0 writes that many dialogues, those of smallest seeded hash (a CPU run
        reads only a few thousand); 0 writes all.
      samples_per_dialogue: how many times every dialogue is written, each time with new negatives.
      negative_pool_size: the most utterances of each role the negatives draw from.

    Returns:
      The stats: `samples_written`, `dialogues_written`, `dialogues_not_sampled`, the dialogues
      dropped by reason (`not_two_interlocutors`, `fewer_than_N_turns`), `dialogues_truncated`,
      `utterances_capped` and the word pieces of each written dialogue (`word_pieces`,
      `unknown_word_pieces`).
    """
    from dialoguecse_tf.records.shards import RoundShardWriter

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
    with RoundShardWriter(DIALOGUES.shard_prefix(output_dir), num_shards, samples_per_dialogue) as writer:
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
                _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats)
                chunk = []
        if chunk:
            _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats)
    stats.increment("samples_written", writer.num_written)
    arguments = {"keep_role": keep_role, "min_dialogue_turns": min_dialogue_turns,
                 "samples_per_dialogue": samples_per_dialogue, "random_seed": random_seed}
    write_records_info(output_dir, spec, DIALOGUES.records_info(stats, arguments))
    logging.info("[dialogues] %d dialogues x %d samples, each with %d negatives: %d records -> %s",
                 stats["dialogues_written"], samples_per_dialogue, spec.num_negatives, writer.num_written, output_dir)
    return stats


def _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats):
    before = writer.num_written
    for shard, sample_round, record in serialize_samples(chunk, tokenizer, spec, random_seed, writer.num_shards,
                                                         stats):
        writer.write(record, shard, sample_round)
    if writer.num_written // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
        logging.info("[dialogues] %d records written", writer.num_written)


DIALOGUES = RecordType(
    name=RECORD_TYPE_DIALOGUES,
    spec_class=DialogueRecordSpec,
    settings_class=DialogueSettings,
    write=write_dialogue_records,
    entry_point="data_prep/create_dialogue_data.py",
    tool="dialogue_records",
    tool_version=2,
    info_arguments=(("keep_role", "keep_role"), ("min_turns", "min_dialogue_turns"),
                    ("samples_per_dialogue", "samples_per_dialogue"), ("random_seed", "random_seed")),
    beam_builder="dialoguecse_tf.records.beam_pipeline:dialogue_pipeline",
    beam_shard_order="rounds",
)
