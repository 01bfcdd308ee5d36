"""The seeded corpus split: its rule on small lists, the Self-dialogue release split 80/10/10, the
files it writes read by the dialogue evaluators and the JSON Lines reader, and its entry point."""

import collections
import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import read_jsonl, read_self_dialogue, write_jsonl
from dialoguecse_tf.data.splits import SPLITS, SplitConfig, run_split_corpus, split_dialogues
from dialoguecse_tf.evaluation.dialogue_sets import read_labelled_dialogues


def _dialogues(n, topics=("a", "b")):
    return [Dialogue(dialogue_id=f"d{i}", services=(topics[i % len(topics)],),
                     turns=(Turn("0", f"hello {i}"), Turn("1", "hi"))) for i in range(n)]


def test_split_sizes_order_and_seed():
    dialogues = _dialogues(25)
    splits = split_dialogues(dialogues, 80, 10, seed=7)
    # get_data.py's select_keys: 25 * 80 // 100 = 20, 25 * 10 // 100 = 2, the rest (3) to test.
    assert [len(splits[name]) for name in SPLITS] == [20, 2, 3]
    ids = [[d.dialogue_id for d in splits[name]] for name in SPLITS]
    assert sorted(sum(ids, [])) == sorted(d.dialogue_id for d in dialogues)
    # Each split keeps the corpus's order.
    assert all(part == sorted(part, key=lambda i: int(i[1:])) for part in ids)
    assert split_dialogues(dialogues, 80, 10, seed=7) == splits
    assert split_dialogues(dialogues, 80, 10, seed=8) != splits
    assert [len(part) for part in split_dialogues(dialogues, 60, 20, seed=7).values()] == [15, 5, 5]


def test_an_evaluation_cut_keeps_train_and_the_first_of_dev_and_test():
    dialogues = _dialogues(100)
    whole = split_dialogues(dialogues, 60, 20, seed=7)
    cut = split_dialogues(dialogues, 60, 20, seed=7, max_eval_dialogues=5)
    assert cut["train"] == whole["train"]
    for name in ("dev", "test"):
        # A seeded sample of the uncut part, in reading order.
        assert len(cut[name]) == 5 and set(map(id, cut[name])) <= set(map(id, whole[name]))
        assert cut[name] == sorted(cut[name], key=lambda d: int(d.dialogue_id[1:]))
    assert split_dialogues(dialogues, 60, 20, seed=7, max_eval_dialogues=50) == whole
    with pytest.raises(ValueError, match="max_eval_dialogues"):
        split_dialogues(dialogues, 60, 20, max_eval_dialogues=-1)


@pytest.mark.parametrize("train, dev", [(0, 10), (80, 0), (90, 10), (95, 10)])
def test_shares_must_leave_every_split_one(train, dev):
    with pytest.raises(ValueError, match="leave test a share"):
        split_dialogues(_dialogues(10), train, dev)


# ---------------------------------------------------------------- the Self-dialogue release


@pytest.fixture(scope="module")
def release(shared_data):
    return list(read_self_dialogue(shared_data / "self_dialogue"))


def test_release_split_is_80_10_10_disjoint_and_seeded(release):
    splits = split_dialogues(release, 80, 10, seed=123)
    assert len(release) == 24164
    assert [len(splits[name]) for name in SPLITS] == [19331, 2416, 2417]
    ids = {name: {d.dialogue_id for d in splits[name]} for name in SPLITS}
    assert sum(len(part) for part in ids.values()) == len(set().union(*ids.values())) == 24164
    assert split_dialogues(release, 80, 10, seed=123) == splits
    other = split_dialogues(release, 80, 10, seed=124)
    assert {d.dialogue_id for d in other["test"]} != ids["test"]
    # Split overall, not by topic: every topic is in every split, in about its corpus share.
    overall = collections.Counter(d.services for d in release)
    for name, share in zip(SPLITS, (0.8, 0.1, 0.1)):
        topics = collections.Counter(d.services for d in splits[name])
        assert set(topics) == set(overall)
        assert all(abs(topics[t] - share * overall[t]) < 4 * (share * overall[t]) ** 0.5 + 3 for t in overall)


def test_split_files_feed_the_dialogue_evaluators_and_the_jsonl_reader(shared_data, release, tmp_path):
    config = SplitConfig(input_file=(str(shared_data / "self_dialogue"),), output_dir=str(tmp_path / "split"),
                         input_format="self_dialogue")
    assert run_split_corpus(config) == {"train": 19331, "dev": 2416, "test": 2417}
    splits = split_dialogues(release, 80, 10, seed=123)
    for name in SPLITS:
        stats = PrepStats()
        written = list(read_jsonl(tmp_path / "split" / f"{name}.jsonl", stats=stats))
        assert [(d.dialogue_id, d.services, d.turns) for d in written] == [
            (d.dialogue_id, d.services, d.turns) for d in splits[name]]
    labelled = read_labelled_dialogues(str(tmp_path / "split" / "test.jsonl"), "service")
    # The one test dialogue of a single sentence has one interlocutor: dropped and counted.
    assert labelled.stats == {"dialogues": 2416, "labels": 23, "dropped": {"not_two_interlocutors": 1},
                              "empty_turns_skipped": 0}
    assert set(labelled.labels) == {d.services[0] for d in release}
    stats = json.loads((tmp_path / "split" / "prep_stats.json").read_text())
    assert (stats["dialogues_read"], stats["blocked_rows_skipped"], stats["test_dialogues"]) == (24164, 63, 2417)
    labels = json.loads((tmp_path / "split" / "labels.json").read_text())
    assert sum(labels["test"].values()) == 2417 and labels["test"]["music"] == 502
    saved = json.loads((tmp_path / "split" / "config.json").read_text())
    assert (saved["random_seed"], saved["train_percent"], saved["dev_percent"]) == (123, 80, 10)


def test_too_small_a_corpus_leaves_a_split_empty(tmp_path):
    path = tmp_path / "small.jsonl"
    write_jsonl(_dialogues(5), path)
    with pytest.raises(ValueError, match="5 dialogues read .* leave dev empty at 80/10/10"):
        run_split_corpus(SplitConfig(input_file=(str(path),), output_dir=str(tmp_path / "out")))
    assert not (tmp_path / "out").exists()


def _split_corpus(*args):
    return subprocess.run([sys.executable, str(REPO_ROOT / "data_prep" / "split_corpus.py"), *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_entry_point(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_jsonl(_dialogues(40), path)
    done = _split_corpus(f"--input_file={path}", f"--output_dir={tmp_path / 'out'}", "--train_percent=50",
                         "--dev_percent=25", "--random_seed=3")
    assert done.returncode == 0, done.stderr[-2000:]
    sizes = [len(list(read_jsonl(tmp_path / "out" / f"{name}.jsonl"))) for name in SPLITS]
    assert sizes == [20, 10, 10]
    bad = _split_corpus(f"--input_file={path}", f"--output_dir={tmp_path / 'bad'}", "--dev_percent=30",
                        "--train_percent=70")
    assert bad.returncode != 0 and bad.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "leave test a share" in bad.stderr and not (tmp_path / "bad").exists()
