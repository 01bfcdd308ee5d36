"""The record builders as Apache Beam pipelines (the `beam` extra): the same records as the
single-process writers for a seed, built on any Beam runner.

A pipeline reads the corpus files with the single-process reader (`source.read_file_dialogues`,
one file per element: the formats' parsers need line numbers and, for mdc, jddc and sgd, lines
of one dialogue together, so a file is read by one worker; the file names are redistributed, so
that the files are read in parallel: split a big corpus into several files per worker). The
dialogues themselves are never shuffled or held between steps: a step that needs a corpus-wide
sample first (a side input) reads the files again once the sample is complete, as the
single-process writers make a second pass (`_Corpus`). Held instead, the DirectRunner would keep every dialogue in memory
(benchmarks/README.md, record building). The corpus-wide
samples are Beam combines given to the per-dialogue step as side inputs (the negative pools and
MLM's random-next pool: `Top.Smallest` over the same hashed items `streaming.BottomK` keeps), the
corpus-wide sets of distinct texts are `CombinePerKey`s (self pairs' first occurrences, MLM's
candidate-only texts), the per-dialogue step calls the record module's own functions
(`contrastive.dialogue_samples`, `pairs.consecutive_pairs`, `dialogues.dialogue_samples`,
`mlm.serialize_documents`, ...), tokenization runs on batches with one tokenizer per worker
(`DoFn.setup`), and each record goes to the shard its seeded hash names (`streaming.shard_of`):
the shard files hold the same multiset of records as the single-process path's. Records reach
their shards through files: each bundle writes a hidden part file per shard (and round, for
dialogue and MLM records), and only the parts' names are grouped by shard, so no runner holds
the records in memory for a shuffle (the DirectRunner would). A shard is then its parts in
order: pair shards sorted by their pairs' seeded hashes, as the single-process writer sorts them
(the same files), dialogue and MLM shards round by round (the same rounds; within a round, the
runner's bundle order), contrastive shards in the runner's order (the single-process writer
keeps corpus order; sorting would cost a sort of every record's bytes).

The counts (`PrepStats`) are gathered per file (reading, kept in file order, so the examples of
malformed lines are those the single-process path lists) and per bundle (records), merged by the
launching process, which then renames the shards into place and writes `records_info.json` as
the single-process writer does.

A record type's pipeline is the function its `RecordType.beam_builder` names, `(corpus, config,
spec, arguments) -> (records, counts)` (`contrastive_pipeline` documents it); this module's are
those of the four types, and the engine around them (reading, part files, shards, counts) is
the same for all.

Runner options pass through `PipelineOptions`: `--runner=DirectRunner --direct_num_workers=2
--direct_running_mode=multi_processing` locally; Dataflow, Flink and Spark as
docs/records_on_beam.md shows. The output folder must be reachable from every worker (a
`gs://` folder on Dataflow).
"""

from __future__ import annotations

import importlib
import os
import pickle
import uuid

import apache_beam as beam
import tensorflow as tf
from absl import logging
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindows

from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.records import contrastive, mlm, pairs
from dialoguecse_tf.records import dialogues as dialogue_records
from dialoguecse_tf.records.shards import (ordered_record, read_record_files, remove_stale_shards, shard_paths,
                                           temporary_path, unordered_records)
from dialoguecse_tf.records.source import no_dialogue_error, read_file_dialogues
from dialoguecse_tf.records.spec import write_records_info
from dialoguecse_tf.records.streaming import shard_of

_STATS = "stats"
_RESULTS_FILE = ".beam_results.pickle"
_PART_SUFFIX = ".part"
# The first element of a counts key: 0, the first read; 1, a bundle's records; _REREAD, another
# read of the corpus; _RECEIVED, the dialogues a reread's per-dialogue step received.
_REREAD = 2
_RECEIVED = 3
_TOKENIZE_BATCH = 256
_DIALOGUE_BATCH = 64
_DOCUMENT_BATCH = 64


class _ReadFile(beam.DoFn):
    """(file index, path) -> (key, dialogue) of the file, and the file's reading counts."""

    def __init__(self, corpus):
        self._corpus = corpus

    def process(self, element):
        file_index, path = element
        stats = PrepStats()
        yield from read_file_dialogues(self._corpus, file_index, path, stats)
        yield beam.pvalue.TaggedOutput(_STATS, ((0, file_index), stats))


def _barrier(label: str, pcollections):
    """A one-element stand-in (`None`) for each of the singleton `pcollections`, computed once it
    is complete: side inputs that hold a step back until all of them are, without handing the
    step their contents (a million-utterance pool)."""
    return [pcollection | f"{label}{index}" >> beam.Map(lambda _: None)
            for index, pcollection in enumerate(pcollections)]


class _Corpus:
    """The corpus files as PCollections of (key, dialogue): `read` gives a new read of the files
    for each pass a pipeline makes over them. Their reading counts (`stats`) are keyed (0, file)
    for the first read, which the records' counts take, and (_REREAD, file) for the others, which
    `run_beam_records` checks against it.

    A reread starts only once the corpus-wide samples its per-dialogue step takes as side
    inputs (`after`) are complete, so that a runner fuses the reading with that step: what
    crosses the runner is file names, not dialogues. Read alongside the first pass instead, its
    dialogues were held by the DirectRunner until the samples were ready and then handed to the
    workers, and with two worker processes whole chunks of them never reached the step
    (benchmarks/README.md, record building)."""

    def __init__(self, files, corpus):
        self._files = files
        self._corpus = corpus
        self.stats = []

    def read(self, label: str, after=()):
        files = self._files
        if after:
            files = files | f"{label}After" >> beam.Map(
                lambda name, *_: name, *[beam.pvalue.AsSingleton(done) for done in _barrier(f"{label}Done", after)])
        read = files | label >> beam.ParDo(_ReadFile(self._corpus)).with_outputs(_STATS, main="dialogues")
        if self.stats:
            self.stats.append(read[_STATS] | f"{label}Counts" >> beam.MapTuple(
                lambda key, stats: ((_REREAD, key[1]), stats)))
        else:
            self.stats.append(read[_STATS])
        return read.dialogues


class _CountingDoFn(beam.DoFn):
    """A DoFn counting into one PrepStats per bundle, emitted to the "stats" output at its end.
    The per-dialogue step of a reread also counts the dialogues it receives (`receive`), keyed
    (_RECEIVED, 0), which `run_beam_records` checks against the dialogues read: a runner that
    lost some on the way fails the run instead of writing fewer records."""

    def start_bundle(self):
        self.stats = PrepStats()
        self._received = 0

    def receive(self):
        self._received += 1

    def finish_bundle(self):
        yield beam.pvalue.TaggedOutput(_STATS, GlobalWindows.windowed_value(((1, 0), self.stats)))
        if self._received:
            received = PrepStats()
            received.increment("dialogues_kept", self._received)
            yield beam.pvalue.TaggedOutput(_STATS, GlobalWindows.windowed_value(((_RECEIVED, 0), received)))


def _received(label: str, stats):
    """The received-dialogue counts of a reread's per-dialogue step: its other counts are the
    first pass's."""
    return stats | label >> beam.Filter(lambda item: item[0][0] == _RECEIVED)


class _WithTokenizer:
    """One tokenizer per worker (`DoFn.setup`), from the record config."""

    def __init__(self, config):
        self._config = config

    def setup(self):
        from dialoguecse_tf.encoder.tokenization import Tokenizer

        self._tokenizer = Tokenizer(self._config.vocab_file, self._config.do_lower_case,
                                    self._config.settings.max_seq_length)


class _RecordDoFn(_CountingDoFn):
    """A counting DoFn of one record type: its spec and the writer's other arguments."""

    def __init__(self, spec, arguments):
        self._spec = spec
        self._arguments = arguments


class _EncodeDoFn(_WithTokenizer, _RecordDoFn):
    """A record DoFn that tokenizes, with one tokenizer per worker."""

    def __init__(self, config, spec, arguments):
        _WithTokenizer.__init__(self, config)
        _RecordDoFn.__init__(self, spec, arguments)


class _ContrastiveSamples(_RecordDoFn):
    def process(self, element, pool):
        self.receive()
        key, dialogue = element
        yield from contrastive.dialogue_samples(
            key, dialogue, self._spec, pool, self._arguments["random_seed"],
            self._arguments["max_responses_per_dialogue"], self._arguments["use_given_candidates"], self.stats)


class _PoolPieces(_WithTokenizer, beam.DoFn):
    def process(self, pool):
        yield contrastive.pool_pieces(pool, self._tokenizer)


class _ContrastiveEncode(_EncodeDoFn):
    """A batch of (example key, sample) -> (shard, 0, serialized record)."""

    def process(self, batch, known):
        serialized = contrastive.serialize_samples([sample for _, sample in batch], self._tokenizer, self._spec,
                                                   self.stats, known)
        for (example_key, _), record in zip(batch, serialized):
            yield shard_of(self._arguments["random_seed"], contrastive.RECORD_TYPE_CONTRASTIVE, example_key,
                           self._arguments["num_shards"]), 0, record


def contrastive_pipeline(corpus, config, spec, arguments):
    """The contrastive records' pipeline (`CONTRASTIVE.beam_builder`): one pass over the corpus for
    the negative pool, one for the samples.

    Args:
      corpus: the `_Corpus` to read.
      config: the `prep.RecordsConfig`.
      spec: the records' spec.
      arguments: the writer's arguments by name (`RecordType.split_settings`).

    Returns:
      (records, counts): the PCollection of (shard, 0, serialized record), and the PCollections of
      per-bundle counts.
    """
    seed = arguments["random_seed"]
    pool = (corpus.read("Read")
            | "PoolItems" >> beam.FlatMap(lambda item: contrastive.pool_items(item[0], item[1], spec, seed))
            | "NegativePool" >> beam.combiners.Top.Smallest(arguments["negative_pool_size"])
            | "PoolSampler" >> beam.Map(contrastive.NegativePool))
    known = pool | "PoolPieces" >> beam.ParDo(_PoolPieces(config))
    samples = corpus.read("ReadForSamples", after=(pool, known)) | "Samples" >> beam.ParDo(
        _ContrastiveSamples(spec, arguments), beam.pvalue.AsSingleton(pool)).with_outputs(_STATS, main="samples")
    encoded = (samples.samples
               | "Batch" >> beam.BatchElements(min_batch_size=_TOKENIZE_BATCH, max_batch_size=_TOKENIZE_BATCH)
               | "Encode" >> beam.ParDo(_ContrastiveEncode(config, spec, arguments),
                                        beam.pvalue.AsSingleton(known)).with_outputs(_STATS, main="records"))
    return encoded.records, (samples[_STATS], encoded[_STATS])


class _ConsecutivePairs(_CountingDoFn):
    def __init__(self, spec, arguments):
        self._spec = spec
        self._min_words = arguments["min_words"]

    def process(self, element):
        key, dialogue = element
        yield from pairs.consecutive_pairs(key, dialogue, self._min_words, self._spec.max_seq_length, self.stats)


class _SelfCandidates(_CountingDoFn):
    """(key, dialogue) -> (text, example key) of its long enough utterances."""

    def __init__(self, arguments):
        self._min_words = arguments["min_words"]

    def process(self, element):
        key, dialogue = element
        for example_key, text in pairs.self_candidates(key, dialogue, self._min_words, self.stats):
            yield text, example_key


class _FirstOccurrence(beam.CombineFn):
    """The smallest example key of a text (keys sort in corpus order) and its occurrences."""

    def create_accumulator(self):
        return None, 0

    def add_input(self, accumulator, key):
        first, count = accumulator
        return (key if first is None else min(first, key)), count + 1

    def merge_accumulators(self, accumulators):
        firsts = [first for first, _ in accumulators if first is not None]
        return (min(firsts) if firsts else None), sum(count for _, count in accumulators)

    def extract_output(self, accumulator):
        return accumulator


class _SelfPairs(_CountingDoFn):
    def __init__(self, spec):
        self._spec = spec

    def process(self, element):
        text, (example_key, count) = element
        if count > 1:
            self.stats.drop("repeated_utterance", count - 1)
        yield pairs.self_pair(example_key, text, self._spec.max_seq_length, self.stats)


class _PairEncode(_EncodeDoFn):
    """A batch of (example key, pair) -> (shard, 0, ordered record): shards are sorted."""

    def process(self, batch):
        for shard, order, record in pairs.serialize_pairs(batch, self._tokenizer, self._spec,
                                                          self._arguments["random_seed"],
                                                          self._arguments["num_shards"], self.stats):
            yield shard, 0, ordered_record(order, record)


def pair_pipeline(corpus, config, spec, arguments):
    """The pair records' pipeline (`PAIRS.beam_builder`, arguments as `contrastive_pipeline`'), in
    one pass over the corpus: (shard, 0, ordered record) and the per-bundle counts. Self pairs keep
    each text's first occurrence: the texts are grouped (CombinePerKey), not held in a set."""
    dialogues = corpus.read("Read")
    if spec.pairing == "consecutive":
        found = dialogues | "Pairs" >> beam.ParDo(_ConsecutivePairs(spec, arguments)).with_outputs(_STATS, main="pairs")
        keyed, stats = found.pairs, [found[_STATS]]
    else:
        candidates = dialogues | "Candidates" >> beam.ParDo(_SelfCandidates(arguments)).with_outputs(
            _STATS, main="candidates")
        found = (candidates.candidates
                 | "FirstOccurrence" >> beam.CombinePerKey(_FirstOccurrence())
                 | "SelfPairs" >> beam.ParDo(_SelfPairs(spec)).with_outputs(_STATS, main="pairs"))
        keyed, stats = found.pairs, [candidates[_STATS], found[_STATS]]
    encoded = (keyed
               | "Batch" >> beam.BatchElements(min_batch_size=_TOKENIZE_BATCH, max_batch_size=_TOKENIZE_BATCH)
               | "Encode" >> beam.ParDo(_PairEncode(config, spec, arguments)).with_outputs(_STATS, main="records"))
    return encoded.records, (*stats, encoded[_STATS])


class _UsableDialogues(_RecordDoFn):
    """(key, dialogue) -> (key, dialogue_items) of the usable dialogues; on a reread
    (`received`), counting the dialogues it receives."""

    def __init__(self, spec, arguments, received=False):
        super().__init__(spec, arguments)
        self._count_received = received

    def process(self, element):
        if self._count_received:
            self.receive()
        key, dialogue = element
        items = dialogue_records.dialogue_items(key, dialogue, self._spec, self._arguments["min_dialogue_turns"],
                                         self._arguments["random_seed"], self.stats)
        if items is not None:
            yield key, items


class _DialogueSamples(_RecordDoFn):
    def process(self, element, pools, chosen, usable):
        dialogue_records.check_enough_dialogues(usable, self._arguments["min_dialogue_turns"])
        key, (found, _, _) = element
        if chosen is not None and key not in chosen:
            self.stats.increment("dialogues_not_sampled")
            return
        self.stats.increment("dialogues_written")
        for sample in dialogue_records.dialogue_samples(key, *found, pools, self._spec, self._arguments["keep_role"],
                                                 self._arguments["samples_per_dialogue"],
                                                 self._arguments["random_seed"]):
            yield key, sample


class _DialogueEncode(_EncodeDoFn):
    """A batch of (dialogue key, sample) -> (shard, round, record): shards are written round by round."""

    def process(self, batch):
        for shard, sample_round, record in dialogue_records.serialize_samples(
                batch, self._tokenizer, self._spec, self._arguments["random_seed"], self._arguments["num_shards"],
                self.stats):
            yield shard, sample_round, record


def dialogue_pipeline(corpus, config, spec, arguments):
    """The dialogue records' pipeline (`DIALOGUES.beam_builder`, arguments as
    `contrastive_pipeline`'): (shard, round, record) and the per-bundle counts. One pass over the
    corpus for the role pools, the sampled dialogues and their count, one for the samples (its
    usable dialogues found again; their counts are the first pass's)."""
    usable = corpus.read("Read") | "Usable" >> beam.ParDo(_UsableDialogues(spec, arguments)).with_outputs(
        _STATS, main="usable")
    pools = (usable.usable
             | "PoolItems" >> beam.FlatMap(lambda item: item[1][1])
             | "RolePools" >> beam.combiners.Top.SmallestPerKey(arguments["negative_pool_size"])
             | "PoolDict" >> beam.combiners.ToDict()
             | "Pools" >> beam.Map(dialogue_records.role_pools))
    max_dialogues = arguments["max_dialogues"]
    if max_dialogues > 0:
        chosen = (usable.usable
                  | "SampleKeys" >> beam.Map(lambda item: item[1][2])
                  | "Chosen" >> beam.combiners.Top.Smallest(max_dialogues)
                  | "ChosenSet" >> beam.Map(lambda items: {key for _, key in items}))
    else:
        chosen = usable.usable.pipeline | "NoSample" >> beam.Create([None])
    count = usable.usable | "CountUsable" >> beam.combiners.Count.Globally()
    usable_again = corpus.read("ReadForSamples", after=(pools, chosen, count)) | "UsableAgain" >> beam.ParDo(
        _UsableDialogues(spec, arguments, received=True)).with_outputs(_STATS, main="usable")
    samples = usable_again.usable | "Samples" >> beam.ParDo(
        _DialogueSamples(spec, arguments), beam.pvalue.AsSingleton(pools), beam.pvalue.AsSingleton(chosen),
        beam.pvalue.AsSingleton(count)).with_outputs(_STATS, main="samples")
    encoded = (samples.samples
               | "Batch" >> beam.BatchElements(min_batch_size=_DIALOGUE_BATCH, max_batch_size=_DIALOGUE_BATCH)
               | "Encode" >> beam.ParDo(_DialogueEncode(config, spec, arguments)).with_outputs(
                   _STATS, main="records"))
    return encoded.records, (usable[_STATS], _received("ReceivedCounts", usable_again[_STATS]), samples[_STATS],
                             encoded[_STATS])


def _utterance_entries(item):
    """(digest, (is a turn, (key, position, text) as a candidate or None)) of a dialogue's texts."""
    key, dialogue = item
    return ([(digest, (True, None)) for digest in mlm.turn_digests(dialogue)]
            + [(digest, (False, (key, position, text))) for digest, position, text in mlm.candidate_entries(dialogue)])


def _text_owner(entries):
    """Whether some dialogue holds a text as a turn, and its smallest (key, position, text) as a
    candidate: the combine of `_utterance_entries` by digest (its result is such an entry too)."""
    entries = list(entries)
    candidates = [candidate for _, candidate in entries if candidate is not None]
    return any(turn for turn, _ in entries), (min(candidates) if candidates else None)


def _owned_candidate(item):
    """(owner key, (position, text)) of a text that is a candidate only."""
    _, (turn, candidate) = item
    if not turn:
        key, position, text = candidate
        yield key, (position, text)


class _TurnDocuments(_CountingDoFn):
    def process(self, element):
        self.receive()
        yield mlm.turn_document(*element)


class _RandomNextPool(_WithTokenizer, beam.DoFn):
    def process(self, items, candidate_documents):
        yield mlm.RandomNextPool(mlm.pool_documents(items, dict(candidate_documents)), self._tokenizer,
                                 self._config.settings.max_seq_length)


class _MlmEncode(_EncodeDoFn):
    """A batch of (document key, texts) -> (shard, round, record): shards are written round by round."""

    def process(self, batch, pool):
        yield from mlm.serialize_documents(batch, self._tokenizer, pool, self._spec, self._config.settings,
                                           self.stats)


def mlm_pipeline(corpus, config, spec, arguments):
    """The MLM records' pipeline (`MLM.beam_builder`, arguments as `contrastive_pipeline`'):
    (shard, round, record) and the counts. The candidate documents come from a CombinePerKey by
    text digest (is the text a turn, and which dialogue holds it first as a candidate), grouped by
    their owner; the pool is a Top.Smallest of the dialogues and those of their candidate
    documents, tokenized once and given to every worker. One pass over the corpus for the texts
    and the pool, one for the documents."""
    settings = config.settings
    dialogues = corpus.read("Read")
    owners = (dialogues
              | "Utterances" >> beam.FlatMap(_utterance_entries)
              | "TextOwners" >> beam.CombinePerKey(_text_owner))
    candidate_documents = (owners
                           | "CandidateOnly" >> beam.FlatMap(_owned_candidate)
                           | "ByOwner" >> beam.GroupByKey()
                           | "CandidateDocuments" >> beam.MapTuple(lambda key, owned: (key,
                                                                                    mlm.candidate_document(owned))))
    text_counts = (owners
                   | "IsTurn" >> beam.Map(lambda item: item[1][0])
                   | "CountTexts" >> beam.combiners.Count.PerElement()
                   | "TextCounts" >> beam.combiners.ToDict())
    utterance_stats = text_counts | "UtteranceStats" >> beam.Map(
        lambda counts, documents: ((1, 0), mlm.utterance_stats(counts.get(True, 0), counts.get(False, 0), documents)),
        beam.pvalue.AsSingleton(candidate_documents | "CountCandidateDocuments" >> beam.combiners.Count.Globally()))
    items = (dialogues
             | "PoolItems" >> beam.Map(lambda item: mlm.pool_item(item[0], item[1], settings.random_seed))
             | "PoolSample" >> beam.combiners.Top.Smallest(settings.random_next_pool_size))
    pool_keys = items | "PoolKeys" >> beam.Map(lambda sampled: {item[1] for item in sampled})
    pool_candidates = (candidate_documents
                       | "PoolCandidates" >> beam.Filter(lambda document, keys: document[0] in keys,
                                                         beam.pvalue.AsSingleton(pool_keys))
                       | "PoolCandidateList" >> beam.combiners.ToList())
    pool = items | "Pool" >> beam.ParDo(_RandomNextPool(config), beam.pvalue.AsSingleton(pool_candidates))
    turn_documents = corpus.read("ReadForDocuments", after=(pool,)) | "TurnDocuments" >> beam.ParDo(
        _TurnDocuments()).with_outputs(_STATS, main="documents")
    keyed_candidates = candidate_documents | "CandidateKeys" >> beam.MapTuple(
        lambda key, texts: ((key, mlm.CANDIDATES), texts))
    encoded = ((turn_documents.documents, keyed_candidates)
               | "Documents" >> beam.Flatten()
               | "Batch" >> beam.BatchElements(min_batch_size=_DOCUMENT_BATCH, max_batch_size=_DOCUMENT_BATCH)
               | "Encode" >> beam.ParDo(_MlmEncode(config, spec, arguments),
                                        beam.pvalue.AsSingleton(pool)).with_outputs(_STATS, main="records"))
    return encoded.records, (utterance_stats, _received("ReceivedCounts", turn_documents[_STATS]), encoded[_STATS])


class _WriteParts(beam.DoFn):
    """(shard, part, record) -> a hidden part file per shard and part (a round of dialogue or MLM
    records, else 0) and bundle; (shard, (part, path, records in it)) of each at the bundle's end. The records
    reach the shards as files: only their names go through a GroupByKey, which the DirectRunner
    would hold in memory."""

    def __init__(self, prefix):
        self._prefix = prefix

    def start_bundle(self):
        self._tag = uuid.uuid4().hex
        self._writers = {}

    def process(self, element):
        shard, part, record = element
        if (shard, part) not in self._writers:
            path = f"{self._prefix}-{shard:05d}-{part:05d}-{self._tag}{_PART_SUFFIX}"
            self._writers[shard, part] = [path, tf.io.TFRecordWriter(path), 0]
        entry = self._writers[shard, part]
        entry[1].write(record)
        entry[2] += 1

    def finish_bundle(self):
        for (shard, part), (path, writer, count) in sorted(self._writers.items()):
            writer.close()
            yield GlobalWindows.windowed_value((shard, (part, path, count)))


class _WriteShard(beam.DoFn):
    """(shard, its part files) -> (shard, count): the parts in part order (paths in name order
    within a part: any order is the runner's anyway), or their records sorted, written under
    the shard's temporary name; the parts are removed."""

    def __init__(self, paths, order):
        self._paths = paths
        self._order = order

    def process(self, element):
        shard, parts = element
        parts = sorted(parts)
        # One dataset over every part: setting one up per file costs milliseconds, and a bundle is small.
        records = read_record_files([path for _, path, _ in parts])
        if self._order == "sorted":
            records = unordered_records(records)
        count = 0
        with tf.io.TFRecordWriter(temporary_path(self._paths[shard])) as writer:
            for record in records:
                writer.write(record)
                count += 1
        expected = sum(records_in_part for _, _, records_in_part in parts)
        if count != expected:
            raise RuntimeError(f"shard {shard}: its {len(parts)} part files hold {count} records, but {expected} "
                               "were written to them")
        for _, path, _ in parts:
            tf.io.gfile.remove(path)
        yield shard, count


def _save_results(results, path):
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(pickle.dumps(results))


def _part_prefix(config, record_type) -> str:
    return os.path.join(config.output_dir, f".{record_type.name}")


def _builder(record_type):
    """The record type's pipeline function (`RecordType.beam_builder`)."""
    module, _, function = record_type.beam_builder.partition(":")
    return getattr(importlib.import_module(module), function)


def build_pipeline(pipeline, record_type, config, spec, arguments, paths):
    """Adds the record type's pipeline to `pipeline`; its results go to the output folder's
    `.beam_results.pickle` (shard counts and counts), which `run_beam_records` reads."""
    builder = _builder(record_type)
    shards = shard_paths(record_type.shard_prefix(config.output_dir), arguments["num_shards"])
    files = (pipeline
             | "Files" >> beam.Create(list(enumerate(paths)))
             | "SpreadFiles" >> beam.Reshuffle())
    corpus = _Corpus(files, config.corpus)
    records, record_stats = builder(corpus, config, spec, arguments)
    counts = (records
              | "WriteParts" >> beam.ParDo(_WriteParts(_part_prefix(config, record_type)))
              | "PartsByShard" >> beam.GroupByKey()
              | "WriteShards" >> beam.ParDo(_WriteShard(shards, record_type.beam_shard_order))
              | "Counts" >> beam.combiners.ToList())
    stats = ((*corpus.stats, *record_stats)
             | "AllStats" >> beam.Flatten()
             | "StatsList" >> beam.combiners.ToList())
    results_path = os.path.join(config.output_dir, _RESULTS_FILE)
    num_rereads = len(corpus.stats) - 1
    _ = (pipeline
         | "Results" >> beam.Create([None])
         | "Save" >> beam.Map(lambda _, counts, stats: _save_results(
             {"counts": counts, "stats": stats, "num_rereads": num_rereads}, results_path),
                              beam.pvalue.AsSingleton(counts), beam.pvalue.AsSingleton(stats)))
    return shards, results_path


def run_beam_records(record_type, config, spec, arguments, paths, stats: PrepStats, pipeline_args) -> PrepStats:
    """Runs the record type's pipeline, then renames its shards into place and writes
    `records_info.json` as its single-process writer does.

    Args:
      record_type: the registered `RecordType`.
      config: the `prep.RecordsConfig`.
      spec: the records' spec.
      arguments: the writer's arguments by name (`RecordType.split_settings`).
      paths: the corpus files.
      stats: the `PrepStats` to count into.
      pipeline_args: Beam pipeline options, e.g. `--runner=DirectRunner`.

    Returns:
      `stats`, with the reading counts of one pass over the files and the records' counts.
    """
    tf.io.gfile.makedirs(config.output_dir)
    options = PipelineOptions(list(pipeline_args))
    with beam.Pipeline(options=options) as pipeline:
        shards, results_path = build_pipeline(pipeline, record_type, config, spec, arguments, paths)
    # Parts of bundles that a runner retried: their records were written again by the retry.
    for path in tf.io.gfile.glob(f"{_part_prefix(config, record_type)}-*{_PART_SUFFIX}"):
        tf.io.gfile.remove(path)
    with tf.io.gfile.GFile(results_path, "rb") as f:
        results = pickle.loads(f.read())
    tf.io.gfile.remove(results_path)
    # Reading counts in file order first, as one pass over the files would count them.
    reread, received = PrepStats(), PrepStats()
    for key, part in sorted(results["stats"], key=lambda item: item[0]):
        {_REREAD: reread, _RECEIVED: received}.get(key[0], stats).merge(part)
    num_rereads = results["num_rereads"]
    if reread["dialogues_read"] != num_rereads * stats["dialogues_read"]:
        raise RuntimeError(f"the runner read {stats['dialogues_read']} dialogues in the first pass over the corpus "
                           f"but {reread['dialogues_read']} in the {num_rereads} other(s)")
    if received["dialogues_kept"] != num_rereads * stats["dialogues_kept"]:
        raise RuntimeError(f"the runner kept {stats['dialogues_kept']} dialogues in each pass over the corpus, but "
                           f"its per-dialogue steps received {received['dialogues_kept']} in the {num_rereads} "
                           "reread(s): it lost dialogues on the way")
    shard_list = [shard for shard, _ in results["counts"]]
    if len(set(shard_list)) != len(shard_list):
        raise RuntimeError(f"the runner wrote some shards twice: {sorted(shard_list)}")
    counts = dict(results["counts"])
    if not stats["dialogues_kept"]:
        raise no_dialogue_error(config.corpus, stats)
    written = sum(counts.values())
    if written == 0:
        raise ValueError(f"no {record_type.name} sample could be built from the input dialogues")
    for shard, path in enumerate(shards):
        if shard not in counts:  # no record hashed to it: an empty file, as the single-process writer leaves
            with tf.io.TFRecordWriter(temporary_path(path)):
                pass
        tf.io.gfile.rename(temporary_path(path), path, overwrite=True)
    remove_stale_shards(shards)
    stats.increment("samples_written", written)
    write_records_info(config.output_dir, spec, record_type.records_info(stats, arguments))
    logging.info("[%s] %d records (Beam) -> %s", record_type.name, written, config.output_dir)
    return stats
