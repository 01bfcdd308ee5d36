"""The data-prep stages: library pipeline functions and their absl entry points."""

import json
import resource
import time

import pytest

from dialoguecse_tf.prep import (
    RS_FILES, SR_MAX_SEQ_LENGTH, CorpusConfig, RecordsConfig, RsSetsConfig, SrSetConfig, VocabConfig, load_dialogues,
    run_build_rs_sets, run_build_sr_set, run_build_vocab, run_create_records,
)
from dialoguecse_tf.data.preprocessing import CHARS_PER_TOKEN, PrepStats
from dialoguecse_tf.data.response_sets import read_dialogue_rs_file, read_utterance_rs_file
from dialoguecse_tf.data.sr_builder import read_select_file
from dialoguecse_tf.io_utils import DataFormatError
from dialoguecse_tf.records.contrastive import RECORD_TYPE_CONTRASTIVE, ContrastiveSettings
from dialoguecse_tf.records.dialogues import RECORD_TYPE_DIALOGUES, DialogueSettings
from dialoguecse_tf.records.mlm import MlmSettings
from dialoguecse_tf.records.pairs import RECORD_TYPE_PAIRS, PairSettings
from dialoguecse_tf.records.reader import read_records_info
from conftest import REPO_ROOT
from forked_entry_points import run_python
from intent_corpus import write_corpus


@pytest.fixture
def corpus(tmp_path):
    return CorpusConfig(input_file=(write_corpus(tmp_path / "corpus.jsonl"),), input_format="jsonl")


def test_all_stages_in_process(tmp_path, corpus):
    vocab = run_build_vocab(VocabConfig(corpus, str(tmp_path / "vocab"), vocab_size=200, min_count=1))
    mlm = run_create_records(RecordsConfig(corpus, str(tmp_path / "mlm"), vocab,
                                           settings=MlmSettings(max_seq_length=16, max_predictions_per_seq=3)))
    assert mlm["samples_written"] > 0 and mlm["dialogues_kept"] == 12
    contrastive = run_create_records(RecordsConfig(corpus, str(tmp_path / "con"), vocab, settings=ContrastiveSettings(
        max_seq_length=16, num_negatives=4, max_responses_per_dialogue=2)))
    assert contrastive["samples_written"] == 24
    spec, _ = read_records_info(str(tmp_path / "con"), RECORD_TYPE_CONTRASTIVE)
    assert spec.num_negatives == 4 and spec.num_context_turns == 3
    # Each type's settings reach its spec and its writer by name.
    run_create_records(RecordsConfig(corpus, str(tmp_path / "pairs"), vocab, settings=PairSettings(
        max_seq_length=12, pairing="self", min_words=1, random_seed=3)))
    spec, stats = read_records_info(str(tmp_path / "pairs"), RECORD_TYPE_PAIRS)
    assert (spec.max_seq_length, spec.pairing, stats["min_words"], stats["shuffle_seed"]) == (12, "self", 1, 3)
    run_create_records(RecordsConfig(corpus, str(tmp_path / "dialogues"), vocab, settings=DialogueSettings(
        max_seq_length=48, num_negatives=2, keep_role="released", min_dialogue_turns=5, max_dialogues=4,
        samples_per_dialogue=2, truncation="recent_turns")))
    spec, stats = read_records_info(str(tmp_path / "dialogues"), RECORD_TYPE_DIALOGUES)
    assert (spec.max_seq_length, spec.num_negatives, spec.truncation) == (48, 2, "recent_turns")
    assert (stats["keep_role"], stats["min_turns"], stats["samples_per_dialogue"], stats["samples_written"]) == (
        "released", 5, 2, 8)
    for stage in ("vocab", "mlm", "con", "pairs", "dialogues"):
        config = json.loads((tmp_path / stage / "config.json").read_text())
        assert config["corpus"]["input_format"] == "jsonl"
        assert config["corpus"]["min_turns"] == 4  # unset: resolved to the format's default
        assert json.loads((tmp_path / stage / "prep_stats.json").read_text())["dialogues_read"] == 12
    with open(corpus.input_file[0], encoding="utf-8") as lines:
        texts = {turn["text"] for line in lines for turn in json.loads(line)["turns"]}
    mlm_stats = json.loads((tmp_path / "mlm" / "prep_stats.json").read_text())
    assert mlm_stats["mlm_distinct_utterances"] == mlm_stats["mlm_turn_utterances"] == len(texts)
    assert mlm_stats["mlm_candidate_only_utterances"] == 0
    run_build_sr_set(SrSetConfig(corpus, str(tmp_path / "sr" / "select.txt"), num_candidates=8, max_positives=3))
    rows = read_select_file(str(tmp_path / "sr" / "select.txt"))
    assert rows and all(0 < len(r.positive_ids) <= 3 for r in rows)
    by_id = {r.id: r for r in rows}
    assert all(by_id[p].intent == r.intent for r in rows for p in r.positive_ids)


def test_min_turns_default_per_format(tmp_path):
    assert CorpusConfig(input_format="mdc").min_turns == 0
    assert CorpusConfig(input_format="jddc").min_turns == 4
    assert CorpusConfig(input_format="mdc", min_turns=2).min_turns == 2
    with pytest.raises(ValueError, match="unknown input format 'csv'"):
        CorpusConfig(input_format="csv")
    # Two JDDC sessions of 2 and 4 turns: the short one goes by default, stays with min_turns=0.
    rows = [f"{session}\tUSERID_1\t{i % 2}\t0\t0\tnan\t第{i}句"
            for session, n in (("s1", 2), ("s2", 4)) for i in range(n)]
    path = tmp_path / "chat.txt"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    stats = PrepStats()
    assert [d.dialogue_id for d in load_dialogues(CorpusConfig((str(path),), "jddc"), stats)] == ["s2"]
    assert stats.dropped == {"too_few_turns": 1}
    kept = load_dialogues(CorpusConfig((str(path),), "jddc", min_turns=0), PrepStats())
    assert [len(d.turns) for d in kept] == [2, 4]


def test_sgd_folder_or_glob_and_an_sr_set_from_its_acts(tmp_path, shared_data):
    dev = shared_data / "sgd" / "dev"
    folder = load_dialogues(CorpusConfig((str(dev),), "sgd"), PrepStats())
    two_files = CorpusConfig((str(dev / "dialogues_00[12].json"),), "sgd")
    stats = PrepStats()
    dialogues = load_dialogues(two_files, stats)
    assert len(folder) == 2098 and dialogues == folder[:len(dialogues)]
    assert stats["dialogues_read"] == stats["dialogues_kept"] == len(dialogues) == 256 and stats["turns_merged"] == 0
    sr_stats = run_build_sr_set(SrSetConfig(two_files, str(tmp_path / "sr" / "select.txt"), num_candidates=20,
                                            max_positives=5))
    rows = read_select_file(str(tmp_path / "sr" / "select.txt"))
    assert len(rows) == sr_stats["queries"] > 3000
    intents = {t.intent for d in dialogues for t in d.turns}
    assert {r.intent for r in rows} <= intents and len({r.intent for r in rows}) > 10
    by_id = {r.id: r for r in rows}
    assert all(by_id[p].intent == r.intent for r in rows for p in r.positive_ids)
    assert all(by_id[n].intent != r.intent for r in rows for n in r.negative_ids)


def test_sr_set_without_negatives_warns_on_stderr_and_in_the_stats(tmp_path, caplog):
    one_intent = tmp_path / "one_intent.jsonl"
    one_intent.write_text(json.dumps({"turns": [
        {"speaker": "user" if i % 2 == 0 else "agent", "text": f"where is my order number {i}", "intent": "order"}
        for i in range(4)]}) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        sr_stats = run_build_sr_set(SrSetConfig(CorpusConfig((str(one_intent),)), str(tmp_path / "sr" / "select.txt"),
                                                num_candidates=8))
    assert sr_stats["queries_without_negatives"] == sr_stats["queries"] == 4
    stats = json.loads((tmp_path / "sr" / "sr_prep_stats.json").read_text())
    assert stats["sr_queries_without_negatives"] == 4
    (warning,) = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert "4 of 4 rows have positives but no negative candidate" in warning and "holds no SR query" in warning


def test_sr_set_of_a_huge_utterance_costs_seconds_and_megabytes(tmp_path):
    # Review finding 7: BM25 tokenized and scored a 10.8 MB utterance in full: 5.6 s and 231 MB here.
    path = tmp_path / "corpus.jsonl"
    write_corpus(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    huge = "where is my order " * 600_000  # 10.8 MB
    first = json.loads(lines[0])
    first["turns"][0]["text"] = huge
    path.write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n", encoding="utf-8")
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    run_build_sr_set(SrSetConfig(CorpusConfig((str(path),)), str(tmp_path / "sr" / "select.txt"), num_candidates=8))
    elapsed = time.perf_counter() - start
    peak_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    print(f"SR set with a 10.8 MB utterance: {elapsed:.2f} s, peak RSS growth {peak_growth_mb:.0f} MB")
    assert elapsed < 5 and peak_growth_mb < 200
    assert json.loads((tmp_path / "sr" / "sr_prep_stats.json").read_text())["utterances_capped"] == 1
    # The row holds as much of it as an encoder can read, as BM25 indexed it.
    (row, *_) = read_select_file(str(tmp_path / "sr" / "select.txt"))
    assert row.sentence == huge[:CHARS_PER_TOKEN * SR_MAX_SEQ_LENGTH]


def test_min_turns_and_missing_input(tmp_path, corpus):
    short = CorpusConfig(corpus.input_file, "jsonl", min_turns=6)
    with pytest.raises(ValueError, match="no dialogue left"):
        run_build_vocab(VocabConfig(short, str(tmp_path / "v")))
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        run_build_vocab(VocabConfig(CorpusConfig((str(tmp_path / "nothing-here*"),)), str(tmp_path / "v")))


def test_settings_are_checked_before_the_corpus_is_read(tmp_path, corpus, tiny_vocab_file, monkeypatch):
    # Review finding 10: a bad vocabulary or output folder was found only after reading the corpus.
    import dialoguecse_tf.prep as pipeline

    def no_reading(*args, **kwargs):
        raise AssertionError("the corpus was read before the settings were checked")

    monkeypatch.setattr(pipeline, "load_dialogues", no_reading)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(FileNotFoundError, match="BERT vocabulary file not found"):
        run_create_records(RecordsConfig(corpus, str(tmp_path / "mlm"), str(tmp_path / "missing.txt"),
                                         settings=MlmSettings()))
    with pytest.raises(ValueError, match="lacks the special tokens"):
        run_create_records(RecordsConfig(corpus, str(tmp_path / "con"), str(a_file), settings=ContrastiveSettings()))
    with pytest.raises(NotADirectoryError, match=f"output_dir {a_file} is not a folder"):
        run_create_records(RecordsConfig(corpus, str(a_file), tiny_vocab_file, settings=ContrastiveSettings()))
    with pytest.raises(NotADirectoryError, match=f"output_dir {a_file / 'sub'}: {a_file} is not a folder"):
        run_build_vocab(VocabConfig(corpus, str(a_file / "sub")))
    with pytest.raises(IsADirectoryError, match=f"output_file {tmp_path} is a folder"):
        run_build_sr_set(SrSetConfig(corpus, str(tmp_path)))
    assert not (tmp_path / "mlm").exists() and not (tmp_path / "con").exists()


def test_min_turns_drops_are_named_and_no_sample_leaves_no_folder(tmp_path, tiny_vocab_file):
    one_turn = tmp_path / "oneturn.jsonl"
    one_turn.write_text("".join(json.dumps({"turns": [{"speaker": "u", "text": f"hello {i}"}]}) + "\n"
                                for i in range(3)), encoding="utf-8")
    with pytest.raises(ValueError, match=r"min_turns=4 dropped all 3 dialogues read"):
        run_build_vocab(VocabConfig(CorpusConfig((str(one_turn),)), str(tmp_path / "v")))
    with pytest.raises(ValueError, match="no contrastive sample could be built"):
        run_create_records(RecordsConfig(CorpusConfig((str(one_turn),), min_turns=0), str(tmp_path / "con"),
                                         tiny_vocab_file, settings=ContrastiveSettings()))
    assert not (tmp_path / "con").exists()


def test_malformed_line_stops_or_is_counted(tmp_path, corpus):
    path = tmp_path / "bad.jsonl"
    good = open(corpus.input_file[0], encoding="utf-8").read().splitlines()
    path.write_text("\n".join(good[:3] + ["{not json"] + good[3:]) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.jsonl:4"):
        run_build_vocab(VocabConfig(CorpusConfig((str(path),)), str(tmp_path / "v")))
    run_build_vocab(VocabConfig(CorpusConfig((str(path),), skip_malformed=True), str(tmp_path / "v"), min_count=1))
    stats = json.loads((tmp_path / "v" / "prep_stats.json").read_text())
    assert stats["malformed_lines"] == 1 and stats["dialogues_kept"] == 12


def _run(script, *args):
    return run_python([REPO_ROOT / "data_prep" / script, *args], text=True, cwd=REPO_ROOT)


@pytest.mark.slow
def test_entry_points_end_to_end_and_errors(tmp_path, corpus):
    source = corpus.input_file[0]
    done = _run("build_vocab.py", f"--input_file={source}", f"--output_dir={tmp_path / 'vocab'}",
                "--vocab_size=200", "--min_count=1")
    assert done.returncode == 0, done.stderr
    done = _run("create_contrastive_data.py", f"--input_file={source}", f"--output_dir={tmp_path / 'con'}",
                f"--vocab_file={tmp_path / 'vocab' / 'vocab.txt'}", "--max_seq_length=16", "--num_negatives=2",
                "--num_shards=2")
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "con").glob("contrastive-*-of-00002.tfrecord"))) == 2
    missing = _run("create_pretraining_data.py", f"--input_file={source}")
    assert missing.returncode != 0 and "output_dir" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"turns": [{"speaker": "u", "text": ""}]}\n', encoding="utf-8")
    failed = _run("create_pretraining_data.py", f"--input_file={bad}", f"--output_dir={tmp_path / 'mlm'}",
                  f"--vocab_file={tmp_path / 'vocab' / 'vocab.txt'}")
    assert failed.returncode != 0 and "bad.jsonl:1" in failed.stderr
    assert not (tmp_path / "mlm").exists() or not list((tmp_path / "mlm").glob("*.tfrecord"))


def test_entry_point_errors_are_one_line(tmp_path):
    failed = _run("build_vocab.py", f"--input_file={tmp_path / 'missing.jsonl'}", f"--output_dir={tmp_path / 'v'}")
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1].startswith("error: FileNotFoundError:")
    assert "Traceback" not in failed.stderr


def test_unknown_word_pieces_are_counted_per_record_type_and_warned_about(tmp_path, tiny_vocab_file, caplog):
    """A corpus the vocabulary does not cover (here: words the tiny vocabulary lacks) loses its
    words to [UNK]; each record type's prep stats count them, and above 5 % a warning names the
    vocabulary. The counts are those of `Tokenizer.count_unknown` on the corpus's utterances."""
    from dialoguecse_tf.encoder.tokenization import Tokenizer

    texts = ["where is my order", "zebra quantum xylophone", "i want a refund please", "退 货 我 想 要 猫 狗",
             "track my package please", "hello thanks"]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps({"turns": [{"speaker": "u" if j % 2 == 0 else "a", "text": texts[(i + j) % 6]}
                                                  for j in range(4)]}) + "\n" for i in range(6)), encoding="utf-8")
    unknown, pieces = Tokenizer(tiny_vocab_file).count_unknown(texts)
    assert 0.05 < unknown / pieces < 1
    for config in (RecordsConfig(CorpusConfig((str(path),)), str(tmp_path / "pairs"), tiny_vocab_file,
                                 settings=PairSettings(min_words=0)),
                   RecordsConfig(CorpusConfig((str(path),)), str(tmp_path / "mlm"), tiny_vocab_file,
                                 settings=MlmSettings())):
        stats = run_create_records(config)
        # Each distinct utterance once (pairs tokenize each distinct text; MLM every utterance of every dialogue).
        assert stats["word_pieces"] > 0 and 0.05 < stats["unknown_word_pieces"] / stats["word_pieces"] < 1
        written = json.loads((tmp_path / config.output_dir.split("/")[-1] / "prep_stats.json").read_text())
        assert written["unknown_word_pieces"] == stats["unknown_word_pieces"]
    pair_stats = json.loads((tmp_path / "pairs" / "prep_stats.json").read_text())
    assert (pair_stats["unknown_word_pieces"], pair_stats["word_pieces"]) == (unknown, pieces)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "[UNK]" in r.getMessage()]
    assert len(warnings) == 2 and all(tiny_vocab_file in warning for warning in warnings)


def test_rs_sets_of_sgd_dev_are_written_read_back_and_seeded(tmp_path, shared_data):
    corpus = CorpusConfig((str(shared_data / "sgd" / "dev"),), "sgd")
    stats = run_build_rs_sets(RsSetsConfig(corpus, str(tmp_path / "a")))
    utterance = read_utterance_rs_file(tmp_path / "a" / RS_FILES["utterance"])
    dialogue = read_dialogue_rs_file(tmp_path / "a" / RS_FILES["dialogue"])
    assert len(utterance.queries) == utterance.scored_rows == stats["rs_utterance_rows"] == 14000
    assert len(dialogue.contexts) == dialogue.responses_among_candidates == stats["rs_dialogue_rows"] == 2088
    assert stats["dialogues_read"] == 2098 and stats["samples_written"] == 16088 and stats["rs_dialogue_no_target"] == 10
    assert json.loads((tmp_path / "a" / "config.json").read_text())["random_seed"] == 12345
    run_build_rs_sets(RsSetsConfig(corpus, str(tmp_path / "b")))
    for name in RS_FILES.values():
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    with pytest.raises(ValueError, match="min_context_turns"):
        RsSetsConfig(corpus, str(tmp_path / "c"), min_context_turns=0)


@pytest.mark.slow
def test_rs_sets_entry_point(tmp_path, shared_data):
    two_files = shared_data / "sgd" / "dev" / "dialogues_00[12].json"
    done = _run("build_rs_sets.py", f"--input_file={two_files}", "--input_format=sgd", "--random_seed=3",
                f"--output_dir={tmp_path / 'rs'}")
    assert done.returncode == 0, done.stderr
    assert len(read_dialogue_rs_file(tmp_path / "rs" / RS_FILES["dialogue"]).contexts) == 256
    failed = _run("build_rs_sets.py", f"--input_file={tmp_path / 'missing.json'}", "--input_format=sgd",
                  f"--output_dir={tmp_path / 'rs2'}")
    assert failed.returncode == 1 and failed.stderr.strip().splitlines()[-1].startswith("error: FileNotFoundError:")
