"""The data-prep stages as library functions, each driven by one config object.

The absl entry points in `data_prep/` only fill these configs from flags; a config is written as
JSON beside the stage's output together with the stats report. Every record type is written by
`run_create_records` from one `RecordsConfig`, whose settings name the type (`records.registry`).
TensorFlow (for tokenization and records) is imported only once the vocabulary, the output folder
and the input patterns have been checked: it takes seconds to load, and a bad path should fail at
once. The record writers stream the corpus (`records.source.DialogueSource`), so a malformed line
further in fails while they run, naming its file and line. Progress and counts go to absl's log.
"""

import dataclasses
import os
import time
from typing import Any

from absl import logging

from dialoguecse_tf.config_fields import check_values, field
from dialoguecse_tf.config_io import CONFIG_FILE, config_to_dict, write_config
from dialoguecse_tf.data.preprocessing import PrepStats, cap_utterances
from dialoguecse_tf.data.response_sets import (build_dialogue_rs_rows, build_utterance_rs_rows, write_dialogue_rs_file,
                                               write_utterance_rs_file)
from dialoguecse_tf.data.sr_builder import build_sr_set, write_select_file
from dialoguecse_tf.encoder.vocabulary import load_vocab
from dialoguecse_tf.io_utils import check_output_dir, write_json
from dialoguecse_tf.records.registry import RECORD_TYPES, record_type_of
from dialoguecse_tf.records.source import CorpusConfig, DialogueSource, corpus_texts, load_dialogues

STATS_FILE = "prep_stats.json"
# An SR row is embedded at evaluation by an encoder that reads at most its
# max_position_embeddings word pieces of it, 512 for BERT.
SR_MAX_SEQ_LENGTH = 512


def check_outputs(output_dir: str, vocab_file: str | None = None) -> None:
    """Checks the vocabulary and the output folder, before the corpus is read: a bad path
    should fail at once, not after minutes of reading."""
    if vocab_file is not None:
        load_vocab(vocab_file)
    check_output_dir(output_dir)


@dataclasses.dataclass(frozen=True)
class VocabConfig:
    corpus: CorpusConfig
    output_dir: str
    vocab_size: int = 8000
    do_lower_case: bool = True
    min_count: int = 2


def run_build_vocab(config: VocabConfig) -> str:
    """Builds a WordPiece vocabulary of the corpus's texts into `output_dir/vocab.txt`; returns its path."""
    check_outputs(config.output_dir)
    stats = PrepStats()
    texts = corpus_texts(load_dialogues(config.corpus, stats))
    from dialoguecse_tf.encoder.tokenization import build_vocab, write_vocab

    start = time.perf_counter()
    vocab = build_vocab(texts, config.vocab_size, config.do_lower_case, config.min_count)
    os.makedirs(config.output_dir, exist_ok=True)
    path = os.path.join(config.output_dir, "vocab.txt")
    write_vocab(vocab, path)
    stats.increment("vocab_size", len(vocab))
    stats.increment("texts", len(texts))
    _finish(config_to_dict(config), config.output_dir, stats, start)
    logging.info("[vocab] %d tokens from %d distinct texts -> %s", len(vocab), len(texts), path)
    return path


ENGINES = ("single", "beam")


@dataclasses.dataclass(frozen=True)
class RecordsConfig:
    """One data-prep run of any record type: the corpus, where the records go, the vocabulary,
    the engine and the record type's settings, whose class names the type
    (`registry.record_type_of`). The fields but `corpus` and `settings` are the shared flags of
    every record entry point (`cli.records_flags`)."""

    corpus: CorpusConfig
    output_dir: str = dataclasses.field(metadata={"help": "Folder for the record shards (TYPE-NNNNN-of-NNNNN"
                                                          ".tfrecord), records_info.json, config.json and "
                                                          "prep_stats.json."})
    vocab_file: str = dataclasses.field(metadata={"help": "WordPiece vocabulary (vocab.txt) of the encoder to train."})
    do_lower_case: bool = field(True, "Must match the vocabulary.")
    engine: str = field(ENGINES[0], "single: this process, streaming the corpus; beam: the Apache Beam pipeline (pip "
                        "extra `beam`), the same records for a seed; the flags this entry point does not define are "
                        "its pipeline options, e.g. --runner=DirectRunner --direct_num_workers=2 "
                        "--direct_running_mode=multi_processing (docs/records_on_beam.md).", choices=ENGINES)
    settings: Any = dataclasses.field(kw_only=True)

    def to_dict(self) -> dict:
        """The config as its `config.json` holds it: the settings beside the shared fields, as one
        flat object, the way the entry point's flags give them."""
        values = config_to_dict(self)
        return {**values, **values.pop("settings")}


def run_create_records(config: RecordsConfig, pipeline_args=()) -> PrepStats:
    """Writes the records `config` describes, with its config and stats.

    `config.engine` "single" writes them in this process, streaming the corpus; "beam" runs the
    record type's Apache Beam pipeline (`records.beam_pipeline`, the `beam` extra). Both write
    the same records for a seed.

    Args:
      config: the run; its settings' class names the record type.
      pipeline_args: Beam pipeline options for engine "beam" (e.g. `--runner=DirectRunner`).

    Returns:
      The counts, also written to `output_dir/prep_stats.json`: the corpus read and kept, the
      record type's own counts, `samples_written` and `write_seconds`.
    """
    if config.engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {config.engine!r}")
    if pipeline_args and config.engine != "beam":
        raise ValueError(f"pipeline options {list(pipeline_args)} are for engine=beam, not {config.engine}")
    record_type = record_type_of(config.settings)
    if config.engine == "beam" and record_type.beam_builder is None:
        raise ValueError(f"engine=beam does not build {record_type.name!r} records yet; it builds "
                         f"{sorted(name for name, other in RECORD_TYPES.items() if other.beam_builder)}")
    check_outputs(config.output_dir, config.vocab_file)
    stats = PrepStats()
    source = DialogueSource(config.corpus, stats)
    from dialoguecse_tf.encoder.tokenization import Tokenizer, unknown_share

    spec, arguments = record_type.split_settings(config.settings)
    start = time.perf_counter()
    if config.engine == "beam":
        from dialoguecse_tf.records.beam_pipeline import run_beam_records

        run_beam_records(record_type, config, spec, arguments, source.paths, stats, pipeline_args)
    else:
        tokenizer = Tokenizer(config.vocab_file, config.do_lower_case, spec.max_seq_length)
        record_type.write(source, tokenizer, config.output_dir, spec, stats=stats, **arguments)
    if stats["word_pieces"]:
        logging.info("[tokens] %s", unknown_share(stats["unknown_word_pieces"], stats["word_pieces"],
                                                  config.vocab_file, "corpus"))
    _finish(config.to_dict(), config.output_dir, stats, start)
    return stats


@dataclasses.dataclass(frozen=True)
class SrSetConfig:
    corpus: CorpusConfig
    output_file: str
    num_candidates: int = 100
    max_positives: int = 30
    max_negatives: int | None = None


def run_build_sr_set(config: SrSetConfig) -> dict:
    """Builds a `select.txt` from the intent-labelled utterances of a corpus.

    Utterances are first cut by `cap_text` for `SR_MAX_SEQ_LENGTH`, so that BM25 does not
    tokenize and score megabytes of a junk utterance. The set is then that of a corpus holding
    the cut texts: an encoder embeds such a row as it would the whole utterance, while BM25
    ranks by the terms of the cut text only.
    """
    if os.path.isdir(config.output_file):
        raise IsADirectoryError(f"output_file {config.output_file} is a folder")
    check_output_dir(os.path.dirname(os.path.abspath(config.output_file)), "output_file")
    stats = PrepStats()
    dialogues = load_dialogues(config.corpus, stats)
    items, seen = [], set()
    for dialogue in cap_utterances(dialogues, SR_MAX_SEQ_LENGTH, stats):
        for turn in dialogue.turns:
            if turn.intent and (turn.text, turn.intent) not in seen:
                seen.add((turn.text, turn.intent))
                items.append((turn.text, turn.intent))
    if not items:
        raise ValueError(f"no intent-labelled utterance in {list(config.corpus.input_file)}; the SR set needs intents")
    rows, sr_stats = build_sr_set(items, config.num_candidates, config.max_positives, config.max_negatives)
    output_dir = os.path.dirname(os.path.abspath(config.output_file))
    os.makedirs(output_dir, exist_ok=True)
    write_select_file(rows, config.output_file)
    for key, value in sr_stats.items():
        if isinstance(value, int):
            stats.increment(f"sr_{key}", value)
    stats.increment("samples_written", len(rows))
    write_config(config, output_dir, "sr_config.json")
    stats.write_json(os.path.join(output_dir, "sr_" + STATS_FILE))
    logging.info("[sr] %d rows -> %s", len(rows), config.output_file)
    # A warning: a set whose rows lack negatives scores nothing for them.
    without = sr_stats["queries_without_negatives"]
    if without:
        consequence = ("so it holds no SR query and evaluation will refuse it" if without == len(rows) else
                       "evaluation scores them as candidates only, not as queries")
        logging.warning("%s: %d of %d rows have positives but no negative candidate (every retrieved candidate "
                        "shares their intent); %s", config.output_file, without, len(rows), consequence)
    return sr_stats


# The files `run_build_rs_sets` writes, by level.
RS_FILES = {"utterance": "rs_utterance.txt", "dialogue": "rs_dialogue.txt"}


@dataclasses.dataclass(frozen=True)
class RsSetsConfig:
    """DSE's two response-selection sets built from a corpus (`data.response_sets`)."""

    corpus: CorpusConfig
    output_dir: str = dataclasses.field(metadata={"help": "Folder for rs_utterance.txt and rs_dialogue.txt (the "
                                                          "release's AmazonQA and DSTC7-Ubuntu file shapes), "
                                                          "config.json and prep_stats.json."})
    random_seed: int = field(12345, "Seeds the draws of both sets (Python's random, one generator per set).")
    response_speaker: str = field("SYSTEM", "The speaker whose turns are the responses, selected and drawn as "
                                  "candidates (SGD: SYSTEM); the turn before each is the utterance-level query.")
    min_context_turns: int = field(4, "Fewest turns before a dialogue-level row's response (DSTC7-Ubuntu's contexts "
                                   "hold more than 3 turns).", minimum=1)
    max_utterance_blocks: int = field(0, "Keep at most this many blocks of 100 utterance-level rows, a seeded "
                                      "sample (the pairs are shuffled first); 0 keeps every whole block.",
                                      minimum=0, added_as=0)
    max_dialogues: int = field(0, "Build the dialogue-level set from a seeded sample of this many dialogues (its "
                               "rows and the turns their candidates are drawn from); 0 reads every dialogue.",
                               minimum=0, added_as=0)

    def __post_init__(self):
        check_values(self)


def run_build_rs_sets(config: RsSetsConfig) -> PrepStats:
    """Writes the utterance- and dialogue-level response-selection sets of a corpus.

    Args:
      config: the corpus, the output folder and the draws' settings.

    Returns:
      The counts, also written to `output_dir/prep_stats.json`: the corpus read and kept, each
      builder's integer counts under `rs_utterance_` and `rs_dialogue_`, `samples_written` (rows
      of both files) and `write_seconds`.
    """
    check_outputs(config.output_dir)
    stats = PrepStats()
    start = time.perf_counter()
    dialogues = load_dialogues(config.corpus, stats)
    speakers = sorted({turn.speaker for dialogue in dialogues for turn in dialogue.turns})
    if config.response_speaker not in speakers:
        raise ValueError(f"no {config.response_speaker} turn in {list(config.corpus.input_file)} (its speakers: "
                         f"{', '.join(speakers[:10])}); give --response_speaker")
    utterance_rows, utterance_stats = build_utterance_rs_rows(dialogues, config.random_seed, config.response_speaker,
                                                              config.max_utterance_blocks)
    dialogue_rows, dialogue_stats = build_dialogue_rs_rows(dialogues, config.random_seed, config.response_speaker,
                                                           config.min_context_turns, config.max_dialogues)
    if not dialogue_rows:
        raise ValueError(f"no dialogue of {list(config.corpus.input_file)} has a {config.response_speaker} turn after "
                         f"{config.min_context_turns} turns or more, so there is no dialogue-level row")
    os.makedirs(config.output_dir, exist_ok=True)
    write_utterance_rs_file(utterance_rows, os.path.join(config.output_dir, RS_FILES["utterance"]))
    write_dialogue_rs_file(dialogue_rows, os.path.join(config.output_dir, RS_FILES["dialogue"]))
    for level, counts in (("utterance", utterance_stats), ("dialogue", dialogue_stats)):
        for key, value in counts.items():
            if isinstance(value, int):
                stats.increment(f"rs_{level}_{key}", value)
    stats.increment("samples_written", len(utterance_rows) + len(dialogue_rows))
    logging.info("[rs] %d utterance-level rows (%d blocks of 100), %d dialogue-level rows (%.1f context turns on "
                 "average) -> %s", len(utterance_rows), utterance_stats["blocks"], len(dialogue_rows),
                 dialogue_stats["mean_context_turns"], config.output_dir)
    _finish(config_to_dict(config), config.output_dir, stats, start)
    return stats

def _finish(config: dict, output_dir: str, stats: PrepStats, start: float) -> None:
    """Counts the writing time and writes the config and the stats beside the output."""
    elapsed = time.perf_counter() - start
    stats.increment("write_seconds", round(elapsed, 3))
    write_json(os.path.join(output_dir, CONFIG_FILE), config, sort_keys=True)
    stats.write_json(os.path.join(output_dir, STATS_FILE))
    logging.info("[stats] %s", stats.to_dict())
