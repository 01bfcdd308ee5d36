"""The data-prep stages as library functions, each driven by one config object.

The absl entry points in `data_prep/` only fill these configs from flags; a config is written as
JSON beside the stage's output together with the stats report. TensorFlow (for tokenization and
records) is imported only once the vocabulary, the output folder and the input patterns have been
checked: it takes seconds to load, and a bad path should fail at once. The record writers stream
the corpus (`records.source.DialogueSource`), so a malformed line further in fails while they
run, naming its file and line.
"""

import dataclasses
import os
import time

from absl import logging

from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.data.preprocessing import PrepStats, cap_utterances
from dialoguecse_tf.data.sr_builder import build_sr_set, write_select_file
from dialoguecse_tf.encoder.vocabulary import load_vocab
from dialoguecse_tf.io_utils import check_output_dir
from dialoguecse_tf.records.source import CorpusConfig, DialogueSource, corpus_texts, load_dialogues
from dialoguecse_tf.records.streaming import DEFAULT_NEGATIVE_POOL_SIZE, DEFAULT_RANDOM_NEXT_POOL_SIZE

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


def run_build_vocab(config: VocabConfig, log=print) -> str:
    check_outputs(config.output_dir)
    stats = PrepStats()
    texts = corpus_texts(load_dialogues(config.corpus, stats, log))
    from dialoguecse_tf.encoder.tokenization import build_vocab, write_vocab

    start = time.perf_counter()
    vocab = build_vocab(texts, config.vocab_size, config.do_lower_case, config.min_count)
    os.makedirs(config.output_dir, exist_ok=True)
    path = os.path.join(config.output_dir, "vocab.txt")
    write_vocab(vocab, path)
    stats.increment("vocab_size", len(vocab))
    stats.increment("texts", len(texts))
    _finish(config, stats, start, log)
    log(f"[vocab] {len(vocab)} tokens from {len(texts)} distinct texts -> {path}")
    return path


@dataclasses.dataclass(frozen=True)
class MlmDataConfig:
    corpus: CorpusConfig
    output_dir: str
    vocab_file: str
    do_lower_case: bool = True
    max_seq_length: int = 50
    max_predictions_per_seq: int = 10
    masked_lm_prob: float = 0.15
    dupe_factor: int = 1
    short_seq_prob: float = 0.1
    random_seed: int = 12345
    num_shards: int = 1
    random_next_pool_size: int = DEFAULT_RANDOM_NEXT_POOL_SIZE
    engine: str = "single"


@dataclasses.dataclass(frozen=True)
class ContrastiveDataConfig:
    corpus: CorpusConfig
    output_dir: str
    vocab_file: str
    do_lower_case: bool = True
    max_seq_length: int = 50
    num_context_turns: int = 3
    context_layout: str = "sides"
    num_negatives: int = 9
    max_responses_per_dialogue: int = 0
    use_given_candidates: bool = True
    random_seed: int = 12345
    num_shards: int = 1
    negative_pool_size: int = DEFAULT_NEGATIVE_POOL_SIZE
    engine: str = "single"


@dataclasses.dataclass(frozen=True)
class PairDataConfig:
    corpus: CorpusConfig
    output_dir: str
    vocab_file: str
    do_lower_case: bool = True
    max_seq_length: int = 32
    pairing: str = "consecutive"
    min_words: int = 3
    random_seed: int = 24
    num_shards: int = 1
    engine: str = "single"


@dataclasses.dataclass(frozen=True)
class DialogueDataConfig:
    corpus: CorpusConfig
    output_dir: str
    vocab_file: str
    do_lower_case: bool = True
    max_seq_length: int = 512
    num_negatives: int = 9
    keep_role: str = "random"
    min_dialogue_turns: int = 5
    max_dialogues: int = 0
    samples_per_dialogue: int = 10
    truncation: str = "head"
    random_seed: int = 12345
    num_shards: int = 1
    negative_pool_size: int = DEFAULT_NEGATIVE_POOL_SIZE
    engine: str = "single"


def _record_writers() -> dict:
    """{config class: (spec class, writer)} of every record type; the records import TensorFlow,
    so this is called once a corpus has been read."""
    from dialoguecse_tf.records import contrastive, dialogues, mlm, pairs

    return {
        MlmDataConfig: (mlm.MlmRecordSpec, mlm.write_mlm_records),
        ContrastiveDataConfig: (contrastive.ContrastiveRecordSpec, contrastive.write_contrastive_records),
        PairDataConfig: (pairs.PairRecordSpec, pairs.write_pair_records),
        DialogueDataConfig: (dialogues.DialogueRecordSpec, dialogues.write_dialogue_records),
    }


# Fields every record config has; each of the others is a field of the record type's spec or
# an argument of its writer, by name.
_SHARED_RECORD_FIELDS = ("corpus", "output_dir", "vocab_file", "do_lower_case", "engine")
ENGINES = ("single", "beam")


def record_settings(config) -> tuple:
    """(spec, writer arguments) of a record config."""
    spec_class, _ = _record_writers()[type(config)]
    settings = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)
                if field.name not in _SHARED_RECORD_FIELDS}
    spec_fields = {field.name for field in dataclasses.fields(spec_class)}
    spec = spec_class(**{name: value for name, value in settings.items() if name in spec_fields})
    return spec, {name: value for name, value in settings.items() if name not in spec_fields}


def run_create_records(config, log=print, pipeline_args=()) -> PrepStats:
    """Writes the records one of the record configs above describes, with its config and stats.

    `config.engine` "single" writes them in this process, streaming the corpus; "beam" runs the
    record type's Apache Beam pipeline (`records.beam_pipeline`, the `beam` extra) with
    `pipeline_args` as its pipeline options (e.g. `--runner=DirectRunner`). Both write the same
    records for a seed.
    """
    engine = getattr(config, "engine", "single")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if pipeline_args and engine != "beam":
        raise ValueError(f"pipeline options {list(pipeline_args)} are for engine=beam, not {engine}")
    check_outputs(config.output_dir, config.vocab_file)
    stats = PrepStats()
    source = DialogueSource(config.corpus, stats, log)
    from dialoguecse_tf.encoder.tokenization import Tokenizer

    _, write_records = _record_writers()[type(config)]
    spec, arguments = record_settings(config)
    start = time.perf_counter()
    if engine == "beam":
        from dialoguecse_tf.records.beam_pipeline import run_beam_records

        run_beam_records(config, spec, arguments, source.paths, stats, pipeline_args, log)
    else:
        tokenizer = Tokenizer(config.vocab_file, config.do_lower_case, config.max_seq_length)
        write_records(source, tokenizer, config.output_dir, spec, stats=stats, log=log, **arguments)
    if stats["word_pieces"]:
        from dialoguecse_tf.encoder.tokenization import unknown_share

        log(f"[tokens] {unknown_share(stats['unknown_word_pieces'], stats['word_pieces'], config.vocab_file, 'corpus')}")
    _finish(config, stats, start, log)
    return stats


@dataclasses.dataclass(frozen=True)
class SrSetConfig:
    corpus: CorpusConfig
    output_file: str
    num_candidates: int = 100
    max_positives: int = 30
    max_negatives: int | None = None


def run_build_sr_set(config: SrSetConfig, log=print) -> dict:
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
    dialogues = load_dialogues(config.corpus, stats, log)
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
    log(f"[sr] {len(rows)} rows -> {config.output_file}")
    # A warning on stderr, not `log`: a set whose rows lack negatives scores nothing for them.
    without = sr_stats["queries_without_negatives"]
    if without:
        consequence = ("so it holds no SR query and evaluation will refuse it" if without == len(rows) else
                       "evaluation scores them as candidates only, not as queries")
        logging.warning("%s: %d of %d rows have positives but no negative candidate (every retrieved candidate "
                        "shares their intent); %s", config.output_file, without, len(rows), consequence)
    return sr_stats


def _finish(config, stats: PrepStats, start: float, log) -> None:
    elapsed = time.perf_counter() - start
    stats.increment("write_seconds", round(elapsed, 3))
    write_config(config, config.output_dir)
    stats.write_json(os.path.join(config.output_dir, STATS_FILE))
    log(f"[stats] {stats.to_dict()}")
