"""Contrastive records ("contrastive") for the DialogueCSE stage (paper, section 3).

One record per response r of a dialogue: its context turns in the spec's `context_layout`
(the `num_context_turns` utterances nearest to r on either side, or up to that many on each
side kept apart; see `ContrastiveRecordSpec`), a turn mask for dialogues too short to
fill them, and the candidates: r first, then `num_negatives` utterances sampled with a seed
from other dialogues (from a bounded uniform sample of the corpus' utterances, `NegativePool`).
Dialogues that arrive with their own candidate list (the authors' training format) keep it:
the first `num_negatives` of its negatives are used.
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from absl import logging

from dialoguecse_tf.config_fields import field
from dialoguecse_tf.data.preprocessing import PrepStats, cap_dialogue, cap_text
from dialoguecse_tf.records.record_type import RecordType
from dialoguecse_tf.records.spec import INT64, FixedFeature, RecordSpec, check_positive_int, write_records_info
from dialoguecse_tf.records.streaming import (DEFAULT_NEGATIVE_POOL_SIZE, BottomK, example_rng, keyed_dialogues,
                                              shard_of, stable_hash)

if TYPE_CHECKING:
    from dialoguecse_tf.encoder.tokenization import PieceTable

RECORD_TYPE_CONTRASTIVE = "contrastive"

CONTEXT_INPUT_IDS = "context_input_ids"
CONTEXT_INPUT_MASK = "context_input_mask"
CONTEXT_TURN_MASK = "context_turn_mask"
CONTEXT_TURN_OFFSET = "context_turn_offset"
CANDIDATE_INPUT_IDS = "candidate_input_ids"
CANDIDATE_INPUT_MASK = "candidate_input_mask"

CONTEXT_LAYOUTS = ("sides", "nearest")


@dataclasses.dataclass(frozen=True)
class ContrastiveRecordSpec(RecordSpec):
    """DialogueCSE records: a response's context turns and its candidates.

    ``context_*`` are ``[num_context_slots, max_seq_length]``, with ``context_turn_mask``
    ``[num_context_slots]`` marking real turns (1) versus padding turns (0) of short contexts
    and ``context_turn_offset`` each turn's signed distance from the response (-1 just
    before it, +1 just after, 0 for padding), so a reader can keep fewer, nearest turns or
    find the single nearest one. ``context_layout`` says how the slots are filled:

    * ``"nearest"``: the ``num_context_turns`` turns nearest to the response on either side
      (ties to the earlier turn), in dialogue order, padding last; ``num_context_slots`` =
      ``num_context_turns``.
    * ``"sides"``: up to ``num_context_turns`` turns on EACH side, kept apart as the
      authors' released code reads them (``context`` and ``next_context``): slots
      ``[0, N)`` hold the left context in dialogue order, right-aligned (its padding
      first), slots ``[N, 2N)`` the right context in dialogue order, left-aligned (its
      padding last). All slots are then in dialogue order, the N nearest turns of either
      side sit next to the response, and ``num_context_slots`` = 2N. Such records also
      serve every "nearest" setting up to N turns.

    ``candidate_*`` are ``[num_candidates, max_seq_length]`` with the true response in row 0.
    Segment ids are all zero and are not stored.
    """

    record_type: ClassVar[str] = RECORD_TYPE_CONTRASTIVE

    max_seq_length: int
    num_context_turns: int
    num_negatives: int
    context_layout: str = "nearest"

    def __post_init__(self):
        check_positive_int("ContrastiveRecordSpec", "max_seq_length", self.max_seq_length, 1)
        check_positive_int("ContrastiveRecordSpec", "num_context_turns", self.num_context_turns, 1)
        check_positive_int("ContrastiveRecordSpec", "num_negatives", self.num_negatives, 0)
        if self.context_layout not in CONTEXT_LAYOUTS:
            raise ValueError(f"ContrastiveRecordSpec.context_layout must be one of {CONTEXT_LAYOUTS}, "
                             f"got {self.context_layout!r}")

    @property
    def num_candidates(self) -> int:
        return 1 + self.num_negatives

    @property
    def num_context_slots(self) -> int:
        return 2 * self.num_context_turns if self.context_layout == "sides" else self.num_context_turns

    def _features(self) -> tuple[FixedFeature, ...]:
        context = (self.num_context_slots, self.max_seq_length)
        candidates = (self.num_candidates, self.max_seq_length)
        return (
            FixedFeature(CONTEXT_INPUT_IDS, INT64, context),
            FixedFeature(CONTEXT_INPUT_MASK, INT64, context),
            FixedFeature(CONTEXT_TURN_MASK, INT64, (self.num_context_slots,)),
            FixedFeature(CONTEXT_TURN_OFFSET, INT64, (self.num_context_slots,)),
            FixedFeature(CANDIDATE_INPUT_IDS, INT64, candidates),
            FixedFeature(CANDIDATE_INPUT_MASK, INT64, candidates),
        )


@dataclasses.dataclass(frozen=True)
class ContrastiveSettings:
    """Every setting of the contrastive records' data prep (`create_contrastive_data.py`'s flags)."""

    max_seq_length: int = field(50, "Tokens per utterance (paper: 50 for ECD/MDC, 100 for JDDC).")
    num_context_turns: int = field(3, "Context utterances per side with context_layout=sides (the authors' code: 3 "
                                   "before and 3 after the response), or nearest on either side with nearest "
                                   "(paper: 3).")
    context_layout: str = field("sides", "sides: left and right contexts kept apart, as the released code reads them "
                                "(serves every setting); nearest: only the num_context_turns nearest turns (records "
                                "of older versions).", choices=CONTEXT_LAYOUTS)
    num_negatives: int = field(9, "Negative responses per sample (paper: 9; the authors' files carry 49).")
    max_responses_per_dialogue: int = field(0, "Responses sampled per dialogue; 0 uses every turn once.")
    use_given_candidates: bool = field(True, "Use the candidate lists the input carries (authors' format); false "
                                       "makes every turn a response with sampled negatives.")
    random_seed: int = field(12345, "Seed for negative and response sampling.")
    num_shards: int = field(1, "Number of output files; a record goes to the one its seeded hash names.")
    negative_pool_size: int = field(DEFAULT_NEGATIVE_POOL_SIZE, "Negatives are drawn from a uniform sample of this "
                                    "many of the corpus' utterances (all of them in a smaller corpus), which bounds "
                                    "the memory of a corpus of any size.")


_CHUNK = 256
_PROGRESS_EVERY = 10000


def nearest_context(num_turns: int, response_index: int, num_context_turns: int) -> list:
    """Indices of the context turns nearest to the response, in dialogue order.

    Distance ties go to the earlier turn, so with 3 turns an interior response takes
    the turn before, the turn after, then the second turn before.
    """
    picked = []
    for distance in range(1, num_turns):
        for index in (response_index - distance, response_index + distance):
            if 0 <= index < num_turns and len(picked) < num_context_turns:
                picked.append(index)
        if len(picked) == num_context_turns:
            break
    return sorted(picked)


def context_slots(num_turns: int, response_index: int, spec: ContrastiveRecordSpec) -> list:
    """The dialogue turn index held by each context slot of `spec`'s layout, None for padding."""
    if spec.context_layout == "nearest":
        picked = nearest_context(num_turns, response_index, spec.num_context_turns)
        return picked + [None] * (spec.num_context_turns - len(picked))
    n = spec.num_context_turns
    left = list(range(max(response_index - n, 0), response_index))
    right = list(range(response_index + 1, min(response_index + 1 + n, num_turns)))
    return [None] * (n - len(left)) + left + right + [None] * (n - len(right))


def pool_items(key: int, dialogue, spec: ContrastiveRecordSpec, random_seed: int) -> list:
    """(hash, key, turn index, capped text) of each turn of a dialogue: what the negative pool
    samples from, by the smallest hashes."""
    scratch = PrepStats()  # the record pass counts the cuts
    return [(stable_hash(random_seed, RECORD_TYPE_CONTRASTIVE, "pool", key, index), key, index,
             cap_text(turn.text, spec.max_seq_length, scratch))
            for index, turn in enumerate(dialogue.turns)]


class NegativePool:
    """Negatives drawn uniformly from a sample of the corpus' utterances (`pool_items`' items
    of smallest hash, sorted), never from the sample's own dialogue nor equal to its response.

    With a pool size at least the corpus' number of turns the sample is every utterance, so
    negatives are uniform over the corpus as the paper samples them; a larger corpus draws from
    a uniform sample of `pool_size` utterances (`negative_pool_size`,
    `streaming.DEFAULT_NEGATIVE_POOL_SIZE`: about 150 bytes each in memory, more for long
    utterances, and about as much again for their word pieces, `pool_pieces`).
    """

    def __init__(self, items):
        self._texts = [item[3] for item in items]
        self._owners = [item[1] for item in items]
        self._enough = len(set(self._owners)) >= 2

    def __len__(self) -> int:
        return len(self._texts)

    @property
    def texts(self) -> list:
        return self._texts

    def sample(self, rng: random.Random, own_key: int, response: str, count: int) -> list:
        if not self._enough:
            raise ValueError("sampling negatives needs at least 2 dialogues")
        negatives = []
        for _ in range(count * 100):
            if len(negatives) == count:
                break
            pick = rng.randrange(len(self._texts))
            if self._owners[pick] != own_key and self._texts[pick] != response:
                negatives.append(self._texts[pick])
        if len(negatives) < count:
            raise ValueError(f"could not sample {count} negatives different from {response!r}")
        return negatives


def collect_negative_pool(keyed, spec: ContrastiveRecordSpec, random_seed: int, pool_size: int) -> NegativePool:
    """The single-process negative pool, from one pass over (key, dialogue) pairs."""
    sample = BottomK(pool_size)
    for key, dialogue in keyed:
        sample.update(pool_items(key, dialogue, spec, random_seed))
    return NegativePool(sample.items())


def pool_pieces(pool: NegativePool, tokenizer, stats: PrepStats | None = None) -> PieceTable:
    """The pool's texts tokenized once: a pool utterance is drawn as a negative about
    num_negatives times, and its dialogue's chunk tokenizes it once more at most."""
    from dialoguecse_tf.encoder.tokenization import PieceTable

    return PieceTable(pool.texts, tokenizer, stats)


def dialogue_samples(key: int, dialogue, spec: ContrastiveRecordSpec, pool: NegativePool, random_seed: int,
                     max_responses_per_dialogue: int, use_given_candidates: bool, stats: PrepStats) -> list:
    """The samples of one dialogue: (example key, (context texts per slot, None for padding;
    context offsets; candidate texts)), in dialogue order. Its random choices come from its own
    RNG (`example_rng`), so they do not depend on which dialogues came before."""
    dialogue = cap_dialogue(dialogue, spec.max_seq_length, stats)
    texts = [turn.text for turn in dialogue.turns]
    if use_given_candidates and dialogue.candidates is not None:
        negatives = list(dialogue.candidates[1:])
        if len(negatives) < spec.num_negatives:
            raise ValueError(
                f"{dialogue.source}:{dialogue.line_number}: has {len(negatives)} negative "
                f"candidates, num_negatives={spec.num_negatives} asked"
            )
        slots = context_slots(len(texts), dialogue.response_index, spec)
        if all(i is None for i in slots):
            stats.drop("no_context")
            return []
        return [((key, dialogue.response_index),
                 (*_slot_texts(texts, slots, dialogue.response_index),
                  [dialogue.candidates[0]] + negatives[: spec.num_negatives]))]
    if len(texts) < 2:
        stats.drop("no_context")
        return []
    rng = example_rng(random_seed, RECORD_TYPE_CONTRASTIVE, key)
    responses = list(range(len(texts)))
    if 0 < max_responses_per_dialogue < len(responses):
        responses = sorted(rng.sample(responses, max_responses_per_dialogue))
    samples = []
    for response_index in responses:
        slots = context_slots(len(texts), response_index, spec)
        negatives = pool.sample(rng, key, texts[response_index], spec.num_negatives)
        samples.append(((key, response_index),
                        (*_slot_texts(texts, slots, response_index), [texts[response_index]] + negatives)))
    return samples


def _slot_texts(texts, slots, response_index):
    return ([None if i is None else texts[i] for i in slots],
            [0 if i is None else i - response_index for i in slots])


def encode_samples(samples, tokenizer, spec: ContrastiveRecordSpec, stats: PrepStats,
                   known: PieceTable | None = None) -> dict:
    """The features of a chunk of samples, each ``[len(samples), *shape]``. Texts in `known`
    (the negative pool's, `pool_pieces`) are taken from it, the others tokenized here, each
    distinct text once."""
    from dialoguecse_tf.encoder.tokenization import PieceTable

    t, k, length = spec.num_context_slots, spec.num_candidates, spec.max_seq_length
    texts = []
    for context, _, candidates in samples:
        texts.extend(["" if text is None else text for text in context] + candidates)
    from_known = np.array([known is not None and text in known for text in texts], bool)
    local = PieceTable([text for text, hit in zip(texts, from_known) if not hit], tokenizer, stats)
    ids = np.empty((len(texts), length), np.int64)
    mask = np.empty((len(texts), length), np.int64)
    word_pieces = np.empty(len(texts), np.int64)
    for table, rows in ((known, from_known), (local, ~from_known)):
        if rows.any():
            ids[rows], mask[rows], word_pieces[rows] = table.pack([text for text, row in zip(texts, rows) if row],
                                                                  length)
    shape = (len(samples), t + k, length)
    ids, mask, word_pieces = ids.reshape(shape), mask.reshape(shape), word_pieces.reshape(shape[:2])
    turn_mask = np.array([[text is not None for text in context] for context, _, _ in samples], np.int64)
    turn_mask = turn_mask.reshape(len(samples), t)
    # A missing turn is all padding, not "[CLS] [SEP]", so it carries no tokens at all (and, as
    # the empty text, no word pieces to count).
    ids[:, :t] *= turn_mask[..., None]
    mask[:, :t] *= turn_mask[..., None]
    stats.increment("tokens_truncated", int(np.maximum(word_pieces - (length - 2), 0).sum()))
    return {
        CONTEXT_INPUT_IDS: ids[:, :t],
        CONTEXT_INPUT_MASK: mask[:, :t],
        CONTEXT_TURN_MASK: turn_mask,
        CONTEXT_TURN_OFFSET: np.array([offsets for _, offsets, _ in samples], np.int64).reshape(len(samples), t),
        CANDIDATE_INPUT_IDS: ids[:, t:],
        CANDIDATE_INPUT_MASK: mask[:, t:],
    }


def serialize_samples(samples, tokenizer, spec: ContrastiveRecordSpec, stats: PrepStats,
                      known: PieceTable | None = None) -> list:
    """`encode_samples` serialized: what a record file holds."""
    return spec.serialize_batch(encode_samples(samples, tokenizer, spec, stats, known))


def write_contrastive_records(
    dialogues,
    tokenizer,
    output_dir: str,
    spec: ContrastiveRecordSpec,
    random_seed: int = 12345,
    max_responses_per_dialogue: int = 0,
    num_shards: int = 1,
    stats: PrepStats | None = None,
    use_given_candidates: bool = True,
    negative_pool_size: int = DEFAULT_NEGATIVE_POOL_SIZE,
) -> PrepStats:
    """Writes sharded contrastive records (`contrastive-*.tfrecord`) and `records_info.json` into
    `output_dir`.

    `dialogues` is read twice (`streaming.keyed_dialogues`): once for the negative pool
    (`NegativePool`, at most `negative_pool_size` utterances), once for the records, one
    dialogue at a time (`dialogue_samples`) and tokenized in chunks. A record goes to the shard
    its seeded hash names (`streaming.shard_of`), in corpus order within its shard. A record
    keeps the first `max_seq_length - 2` pieces of each text, so utterances are cut by
    `cap_text` first (the negative sampler then compares cut texts: two that agree in them give
    identical records).

    Args:
      dialogues: the corpus, read twice: a `source.DialogueSource`, or a list of dialogues.
      tokenizer: the `Tokenizer` of the encoder to train.
      output_dir: the records' folder.
      spec: the records' spec: context turns and layout, negatives, row length.
      random_seed: the seed of the negative pool, the sampled responses and negatives, and the shards.
      max_responses_per_dialogue: > 0 samples that many responses per dialogue (seeded); 0 makes
        every turn a response once.
      num_shards: the number of shard files.
      stats: the `PrepStats` to count into; a new one if None.
      use_given_candidates: whether dialogues that carry a candidate list keep it; False treats
        them like any other (every turn a response with sampled negatives, which multiplies the
        samples a small corpus yields).
      negative_pool_size: the most utterances the negatives are drawn from.

    Returns:
      The stats: `samples_written`, the dialogues without a sample (`no_context`, in `dropped`),
      the texts cut (`utterances_capped`, `tokens_truncated`) and the word pieces of the distinct
      texts of each chunk and of the pool (`word_pieces`, `unknown_word_pieces`).
    """
    from dialoguecse_tf.records.shards import ShardedRecordWriter

    stats = stats if stats is not None else PrepStats()
    pool = collect_negative_pool(keyed_dialogues(dialogues), spec, random_seed, negative_pool_size)
    known = pool_pieces(pool, tokenizer, stats)
    with ShardedRecordWriter(CONTRASTIVE.shard_prefix(output_dir), num_shards) as writer:
        chunk = []
        for key, dialogue in keyed_dialogues(dialogues):
            chunk.extend(dialogue_samples(key, dialogue, spec, pool, random_seed, max_responses_per_dialogue,
                                          use_given_candidates, stats))
            if len(chunk) >= _CHUNK:
                _write_chunk(writer, chunk, tokenizer, known, spec, random_seed, stats)
                chunk = []
        if chunk:
            _write_chunk(writer, chunk, tokenizer, known, spec, random_seed, stats)
        if writer.num_written == 0:
            raise ValueError("no contrastive sample could be built from the input dialogues")
    stats.increment("samples_written", writer.num_written)
    write_records_info(output_dir, spec, CONTRASTIVE.records_info(stats, {}))
    logging.info("[contrastive] %d records -> %s", writer.num_written, output_dir)
    return stats


def _write_chunk(writer, chunk, tokenizer, known, spec, random_seed, stats):
    before = writer.num_written
    serialized = serialize_samples([sample for _, sample in chunk], tokenizer, spec, stats, known)
    for (example_key, _), record in zip(chunk, serialized):
        writer.write(record, shard_of(random_seed, RECORD_TYPE_CONTRASTIVE, example_key, writer.num_shards))
    if writer.num_written // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
        logging.info("[contrastive] %d records written", writer.num_written)


CONTRASTIVE = RecordType(
    name=RECORD_TYPE_CONTRASTIVE,
    spec_class=ContrastiveRecordSpec,
    settings_class=ContrastiveSettings,
    write=write_contrastive_records,
    entry_point="data_prep/create_contrastive_data.py",
    tool="contrastive_records",
    tool_version=2,
    beam_builder="dialoguecse_tf.records.beam_pipeline:contrastive_pipeline",
)
