"""Records built by the Beam pipelines (`records.beam_pipeline`) against the single-process writers.

Both paths put each record in the shard its seeded hash names, so every shard file holds the same
multiset of serialized records on both. Contrastive shards differ in order: the single-process
writer keeps corpus order, a Beam shard is written in the order of the runner's bundles, so they
are compared as multisets (collections.Counter of the bytes). Pair
shards are sorted by a seeded hash on both paths, so they are compared as lists. Dialogue and MLM
shards are written round by round on both paths, in corpus order within a round on the
single-process path and in the runner's bundle order on Beam: multisets, and round by round.
"""

import collections
import json
import weakref

import apache_beam as beam
import pytest
import tensorflow as tf

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.prep import CorpusConfig, RecordsConfig, run_create_records
from dialoguecse_tf.data.preprocessing import CHARS_PER_TOKEN, PrepStats
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.records import contrastive
from dialoguecse_tf.records.contrastive import ContrastiveRecordSpec, ContrastiveSettings, write_contrastive_records
from dialoguecse_tf.records.dialogues import DialogueSettings
from dialoguecse_tf.records.mlm import MlmSettings
from dialoguecse_tf.records.pairs import PairSettings
from dialoguecse_tf.records.reader import read_records_info
from conftest import TINY_WORDS, write_tiny_vocab

IN_PROCESS = ("--runner=DirectRunner", "--direct_num_workers=1")
TWO_PROCESSES = ("--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing")


def _dialogue_line(i):
    words = TINY_WORDS[i % 7:] + TINY_WORDS[:i % 7]
    turns = [{"speaker": "ua"[j % 2], "text": " ".join(words[3 * j:3 * j + 2 + (i + j) % 3])}
             for j in range(1 + i % 5)]
    if i == 5:  # cut by cap_text: counted on both paths
        turns[0]["text"] = "order " * (CHARS_PER_TOKEN * 8)
    return json.dumps({"turns": turns})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two files, 40 dialogues of 1 to 5 turns (1-turn ones give no sample), a malformed line
    in each file (skipped and counted), and a vocabulary."""
    folder = tmp_path_factory.mktemp("corpus")
    for part, lines in enumerate((range(0, 25), range(25, 40))):
        text = [_dialogue_line(i) for i in lines]
        text.insert(3, "{not json")
        (folder / f"part-{part}.jsonl").write_text("\n".join(text) + "\n", encoding="utf-8")
    corpus = CorpusConfig(input_file=(str(folder / "part-*.jsonl"),), input_format="jsonl", skip_malformed=True,
                          min_turns=0)
    return corpus, write_tiny_vocab(folder / "vocab.txt")


def _build(corpus, folder, engine, pipeline_args=(), settings_class=ContrastiveSettings, **settings):
    """The shards (each a list of its records, in file order), records info and prep stats."""
    corpus_config, vocab = corpus
    defaults = {"max_seq_length": 8, "num_shards": 3}
    if settings_class is ContrastiveSettings:
        defaults["num_negatives"] = 3
    config = RecordsConfig(corpus_config, str(folder), vocab, engine=engine,
                           settings=settings_class(**{**defaults, **settings}))
    run_create_records(config, pipeline_args)
    info = read_records_info(str(folder))
    with open(folder / "prep_stats.json", encoding="utf-8") as f:
        prep_stats = json.load(f)
    prep_stats.pop("write_seconds")
    shards = {path.name: list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
              for path in sorted(folder.glob("*.tfrecord"))}
    return shards, info, prep_stats


# The word-piece and [UNK] counts are over the distinct texts of each chunk a writer tokenizes at
# once, so the engines' differ (docs/reliability.md); the stats are compared without them.
_SINGLE_ONLY = ("word_pieces", "unknown_word_pieces")


def _as_multisets(built):
    shards, info, prep_stats = built
    info = (info[0], {k: v for k, v in info[1].items() if k not in _SINGLE_ONLY}, *info[2:])
    prep_stats = {k: v for k, v in prep_stats.items() if k not in _SINGLE_ONLY}
    return {name: collections.Counter(records) for name, records in shards.items()}, info, prep_stats


@pytest.fixture(scope="module")
def single(corpus, tmp_path_factory):
    return _as_multisets(_build(corpus, tmp_path_factory.mktemp("single"), "single", max_responses_per_dialogue=3))


@pytest.mark.slow
def test_contrastive_beam_records_equal_the_single_process_records(corpus, single, tmp_path):
    shards, info, prep_stats = single
    assert [name for name in shards] == [f"contrastive-{i:05d}-of-00003.tfrecord" for i in range(3)]
    assert all(len(counter) > 5 for counter in shards.values())
    stats = info[1]
    assert stats["malformed_lines"] == 2 and stats["utterances_capped"] == 1 and stats["dropped"]["no_context"] == 8
    assert stats["samples_written"] == sum(sum(c.values()) for c in shards.values())
    assert _as_multisets(_build(corpus, tmp_path / "beam", "beam", IN_PROCESS, max_responses_per_dialogue=3)) == single
    other_seed = _as_multisets(_build(corpus, tmp_path / "seed", "single", max_responses_per_dialogue=3,
                                      random_seed=7))
    assert other_seed[0] != shards and other_seed[1][1]["samples_written"] == stats["samples_written"]


@pytest.mark.slow
def test_contrastive_beam_records_on_two_worker_processes(corpus, single, tmp_path):
    assert _as_multisets(_build(corpus, tmp_path / "beam2", "beam", TWO_PROCESSES,
                                max_responses_per_dialogue=3)) == single


def test_small_negative_pool_keeps_both_paths_equal(corpus, tmp_path):
    """A pool smaller than the corpus: both paths sample the same 10 utterances by hash."""
    single = _as_multisets(_build(corpus, tmp_path / "single", "single", negative_pool_size=10))
    assert _as_multisets(_build(corpus, tmp_path / "beam", "beam", IN_PROCESS, negative_pool_size=10)) == single


@pytest.mark.parametrize("pairing", ["consecutive", "self"])
def test_pair_beam_records_equal_the_single_process_records_in_order(corpus, pairing, tmp_path):
    """Pair shards are sorted by a seeded hash of their pairs, so both paths write the same files
    record for record; self pairs keep each text's first occurrence on both (the corpus repeats
    texts: its lines cycle through the same words)."""
    settings = {"settings_class": PairSettings, "pairing": pairing, "min_words": 2}
    single = _build(corpus, tmp_path / "single", "single", **settings)
    shards, info, prep_stats = single
    assert all(len(records) > 3 for records in shards.values())
    assert info[1]["samples_written"] == sum(len(records) for records in shards.values())
    if pairing == "self":
        assert info[1]["dropped"]["repeated_utterance"] > 5 and info[1]["dropped"]["short_utterance"] > 5
    assert _build(corpus, tmp_path / "beam", "beam", IN_PROCESS, **settings) == single


@pytest.mark.slow
@pytest.mark.parametrize("max_dialogues, pool_size", [(6, 5), (0, 1000)])
def test_dialogue_beam_records_equal_the_single_process_records(corpus, max_dialogues, pool_size, tmp_path):
    """6 or all 24 usable dialogues, 2 samples each, negatives from role pools of 5 utterances
    sampled by hash or of all: the same records on both paths (each shard round by round on
    both, in corpus order within a round on the single-process path only)."""
    settings = {"settings_class": DialogueSettings, "max_seq_length": 24, "num_negatives": 2,
                "min_dialogue_turns": 3, "max_dialogues": max_dialogues, "samples_per_dialogue": 2,
                "negative_pool_size": pool_size}
    single = _as_multisets(_build(corpus, tmp_path / "single", "single", **settings))
    stats = single[1][1]
    written = max_dialogues or 24
    assert stats["samples_written"] == 2 * written and stats["dialogues_written"] == written
    assert stats.get("dialogues_not_sampled", 0) == 24 - written
    assert stats["dropped"]["fewer_than_3_turns"] == stats["dropped"]["not_two_interlocutors"] == 8
    assert _as_multisets(_build(corpus, tmp_path / "beam", "beam", IN_PROCESS, **settings)) == single


def _candidate_line(i):
    """Dialogue `i` of 2 to 4 turns (3 consecutive words each), its second turn the response of
    a candidate list: the response, another dialogue's first turn, two texts that only candidate
    lists hold and the first of them again. Those are 20 texts "W code", dialogue i holding the
    (i % 20)-th, so dialogues 0 to 19 own one (18 and 19 in the second file), and 12 texts
    "W W code", owned by dialogues 0 to 11."""
    words = TINY_WORDS[i % 11:] + TINY_WORDS[:i % 11]
    turns = [{"speaker": "ua"[j % 2], "text": " ".join(words[2 * j:2 * j + 3])} for j in range(2 + i % 3)]
    only = [f"{TINY_WORDS[i % 20]} code", f"{TINY_WORDS[5 * i % 12]} {TINY_WORDS[i % 3]} code"]
    candidates = [turns[1]["text"], " ".join(TINY_WORDS[(i + 5) % 11:][:3]), *only, only[0]]
    return json.dumps({"turns": turns, "response_index": 1, "candidates": candidates,
                       "candidate_labels": [1, 0, 0, 0, 0]})


@pytest.fixture(scope="module")
def candidate_corpus(tmp_path_factory):
    """Two files, 30 dialogues with candidate lists (the authors' contrastive samples as JSON
    Lines), and a vocabulary."""
    folder = tmp_path_factory.mktemp("candidates")
    for part, lines in enumerate((range(0, 18), range(18, 30))):
        (folder / f"part-{part}.jsonl").write_text("\n".join(_candidate_line(i) for i in lines) + "\n",
                                                   encoding="utf-8")
    corpus = CorpusConfig(input_file=(str(folder / "part-*.jsonl"),), input_format="jsonl", min_turns=0)
    return corpus, write_tiny_vocab(folder / "vocab.txt")


def _in_rounds(built, one_round):
    """Each shard's records as (the multiset of its first round, that of the rest), its first
    round as long as the shard of `one_round`, the same records with dupe_factor=1."""
    shards, info, prep_stats = built
    return {name: (collections.Counter(records[:len(one_round[0][name])]),
                   collections.Counter(records[len(one_round[0][name]):])) for name, records in shards.items()}, info, \
        prep_stats


MLM_SETTINGS = {"settings_class": MlmSettings, "max_seq_length": 12, "max_predictions_per_seq": 3}


@pytest.mark.slow
@pytest.mark.parametrize("pool_size", [1000, 4])
def test_mlm_beam_records_equal_the_single_process_records(candidate_corpus, pool_size, tmp_path):
    """30 dialogues and their candidate documents, masked twice (dupe_factor=2), random next
    segments from all of them or from the documents of 4 dialogues sampled by hash: the same
    records in every shard on both paths, round by round (a shard's first round holds the records
    of a dupe_factor=1 run: a round's RNGs are its own), and the same counts."""
    settings = {**MLM_SETTINGS, "random_next_pool_size": pool_size}
    one_round = _build(candidate_corpus, tmp_path / "one_round", "single", dupe_factor=1, **settings)
    single = _in_rounds(_build(candidate_corpus, tmp_path / "single", "single", dupe_factor=2, **settings), one_round)
    assert all(first == collections.Counter(one_round[0][name]) and sum(rest.values()) > 5
               for name, (first, rest) in single[0].items())
    stats = single[1][1]
    assert (stats["mlm_distinct_utterances"] - stats["mlm_turn_utterances"], stats["mlm_candidate_only_utterances"],
            stats["mlm_candidate_documents"]) == (32, 32, 20)
    assert stats["samples_written"] == sum(sum(first.values()) + sum(rest.values()) for first, rest in single[0].values())
    assert _in_rounds(_build(candidate_corpus, tmp_path / "beam", "beam", IN_PROCESS, dupe_factor=2, **settings),
                      one_round) == single


@pytest.mark.slow
def test_mlm_beam_records_on_two_worker_processes(candidate_corpus, tmp_path):
    settings = {**MLM_SETTINGS, "dupe_factor": 2}
    single = _as_multisets(_build(candidate_corpus, tmp_path / "single", "single", **settings))
    assert _as_multisets(_build(candidate_corpus, tmp_path / "beam2", "beam", TWO_PROCESSES, **settings)) == single


class _Corpus:
    """A corpus made on the fly, pass after pass, that records how many of its dialogues are
    alive at once (Dialogue objects are weakly referenceable)."""

    def __init__(self, size):
        self.size = size
        self.passes = 0
        self.alive = 0
        self.most_alive = 0

    def _gone(self):
        self.alive -= 1

    def keyed(self):
        self.passes += 1
        for i in range(self.size):
            dialogue = Dialogue(str(i), tuple(Turn("ua"[j % 2], f"{TINY_WORDS[(i + j) % 20]} order {i % 97}")
                                              for j in range(4)))
            self.alive += 1
            self.most_alive = max(self.most_alive, self.alive)
            weakref.finalize(dialogue, self._gone)
            yield i, dialogue


def test_single_process_writer_streams_with_a_bounded_pool(tmp_path, monkeypatch):
    """3,000 dialogues through the writer: read twice, never more than a few alive at once, and
    the negative pool holds its 500 utterances, not the corpus' 12,000."""
    pools = []
    collect = contrastive.collect_negative_pool
    monkeypatch.setattr(contrastive, "collect_negative_pool", lambda *args: pools.append(collect(*args)) or pools[-1])
    corpus = _Corpus(3000)
    tokenizer = Tokenizer(write_tiny_vocab(tmp_path / "vocab.txt"), max_seq_length=8)
    spec = ContrastiveRecordSpec(max_seq_length=8, num_context_turns=2, num_negatives=2)
    stats = write_contrastive_records(corpus, tokenizer, str(tmp_path / "out"), spec, stats=PrepStats(),
                                      negative_pool_size=500)
    assert stats["samples_written"] == 12000 and corpus.passes == 2
    assert len(pools[0]) == 500
    # A chunk of samples holds texts, not dialogues: at most the dialogue being read is alive.
    assert corpus.most_alive <= 2
    with pytest.raises(TypeError, match="one-shot iterator"):
        write_contrastive_records(iter([]), tokenizer, str(tmp_path / "x"), spec)


def test_a_shard_whose_parts_lost_records_is_refused(tmp_path):
    from dialoguecse_tf.records.beam_pipeline import _WriteShard

    part = str(tmp_path / "part-0")
    with tf.io.TFRecordWriter(part) as writer:
        writer.write(b"one")
        writer.write(b"two")
    writer = _WriteShard([str(tmp_path / "shard-0")], None)
    with pytest.raises(RuntimeError, match="shard 0: its 1 part files hold 2 records, but 3 were written"):
        list(writer.process((0, [(0, part, 3)])))
    assert list(writer.process((0, [(0, part, 2)]))) == [(0, 2)]


# MLM's case stays in the fast tier: the other two cost seconds each.
@pytest.mark.parametrize("settings_class", [pytest.param(ContrastiveSettings, marks=pytest.mark.slow),
                                            pytest.param(DialogueSettings, marks=pytest.mark.slow), MlmSettings])
def test_a_runner_that_loses_reread_dialogues_fails_the_run(corpus, settings_class, tmp_path, monkeypatch):
    """The per-dialogue step of a reread counts what reaches it: a runner that drops a dialogue
    between the read and that step (as the DirectRunner did with two workers, on a million
    dialogues) fails the run, although every read counted the whole corpus."""
    from dialoguecse_tf.records import beam_pipeline

    read = beam_pipeline._Corpus.read

    def lossy_read(self, label, after=()):
        dialogues = read(self, label, after)
        if label == "Read":
            return dialogues
        return dialogues | f"{label}Lost" >> beam.Filter(lambda item: item[0] != 0)

    monkeypatch.setattr(beam_pipeline._Corpus, "read", lossy_read)
    with pytest.raises(RuntimeError,
                       match=r"kept 40 dialogues in each pass .* received 39 in the 1 reread\(s\): it lost dialogues"):
        _build(corpus, tmp_path / "beam", "beam", IN_PROCESS, settings_class=settings_class)
