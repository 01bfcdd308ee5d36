"""Paper section 5.1.1 preprocessing: speaker-turn merging, the min-turns filter, stats."""

import json

import pytest

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import (
    PrepStats,
    filter_min_turns,
    join_utterances,
    merge_consecutive_speaker_turns,
    preprocess,
)
from dialoguecse_tf.data.readers import read_authors_contrastive


def dialogue(*turns, **kwargs):
    return Dialogue("d", tuple(Turn(*t) for t in turns), **kwargs)


@pytest.mark.parametrize("first, second, joined", [
    ("hello", "world", "hello world"),
    ("你好", "在吗", "你好在吗"),
    ("好的", "ok", "好的ok"),
    ("order 123", "到了吗", "order 123到了吗"),
    ("在吗？", "hi", "在吗？hi"),  # fullwidth punctuation counts as CJK
    ("안녕", "하세요", "안녕 하세요"),  # Korean separates words with spaces
    ("trailing ", "space", "trailing space"),
    ("你好 在 吗", "我 要", "你好 在 吗我 要"),
])
def test_join_utterances(first, second, joined):
    assert join_utterances(first, second) == joined


def test_merge_consecutive_turns_and_intents():
    merged = merge_consecutive_speaker_turns(dialogue(
        ("user", "hi", None),
        ("user", "I want a taxi", "request"),
        ("user", "now", "inform"),
        ("agent", "where to?", "request"),
        ("user", "airport", None),
        ("user", "机场", None),
    ))
    # A merged turn keeps one intent: the first its utterances carry (dialogue.turn_intent's rule).
    assert merged.turns == (
        Turn("user", "hi I want a taxi now", "request"),
        Turn("agent", "where to?", "request"),
        Turn("user", "airport机场", None),
    )
    assert merged.dialogue_id == "d" and merged.response_index is None


def test_merge_leaves_alternating_dialogue_alone():
    original = dialogue(("0", "a"), ("1", "b"), ("0", "c"))
    assert merge_consecutive_speaker_turns(original) == original


def test_merge_keeps_the_response_separate_and_tracks_its_index():
    original = dialogue(
        ("0", "a"), ("0", "b"), ("1", "c"), ("1", "d"),  # left context
        ("1", "回复"),  # response: same speaker as its neighbours, still never merged
        ("1", "e"), ("0", "f"), ("0", "g"),  # right context
        response_index=4, candidates=("回复", "x"), candidate_labels=(1, 0),
    )
    merged = merge_consecutive_speaker_turns(original)
    assert [t.text for t in merged.turns] == ["a b", "c d", "回复", "e", "f g"]
    assert merged.response_index == 2
    assert merged.turns[merged.response_index].text == merged.candidates[0]
    assert (merged.candidates, merged.candidate_labels) == (original.candidates, original.candidate_labels)


def test_merge_response_at_the_edges():
    merged = merge_consecutive_speaker_turns(dialogue(("0", "r"), ("0", "a"), ("0", "b"), response_index=0))
    assert ([t.text for t in merged.turns], merged.response_index) == (["r", "a b"], 0)
    merged = merge_consecutive_speaker_turns(dialogue(("0", "a"), ("0", "b"), ("0", "r"), response_index=2))
    assert ([t.text for t in merged.turns], merged.response_index) == (["a b", "r"], 1)


def test_filter_min_turns():
    dialogues = [dialogue(*[("0", "x")] * n) for n in (1, 3, 4, 7)]
    stats = PrepStats()
    assert [len(d.turns) for d in filter_min_turns(dialogues, 4, stats)] == [4, 7]
    assert stats.dropped == {"too_few_turns": 2}
    assert len(list(filter_min_turns(dialogues, 0))) == 4
    with pytest.raises(ValueError, match="min_turns"):
        filter_min_turns(dialogues, -1)


def test_preprocess_merges_before_counting_turns():
    dialogues = [
        # 4 utterances but only 2 turns once merged: dropped.
        dialogue(("0", "a"), ("0", "b"), ("1", "c"), ("1", "d")),
        dialogue(("0", "a"), ("1", "b"), ("0", "c"), ("1", "d"), ("1", "e")),
        dialogue(("0", "a"), ("1", "b"), ("0", "c"), ("1", "d")),
    ]
    stats = PrepStats()
    kept = list(preprocess(dialogues, stats=stats))
    assert [[t.text for t in d.turns] for d in kept] == [["a", "b", "c", "d e"], ["a", "b", "c", "d"]]
    assert stats["turns_merged"] == 3
    assert stats["dialogues_kept"] == 2
    assert stats.dropped == {"too_few_turns": 1}

    stats = PrepStats()
    assert len(list(preprocess(dialogues, merge_speakers=False, min_turns=0, stats=stats))) == 3
    assert stats["turns_merged"] == 0 and stats["dialogues_kept"] == 3 and stats.dropped == {}


def test_preprocess_real_sample(shared_data):
    # The released sample alternates speakers and has 4..19 turns per line: nothing changes.
    stats = PrepStats()
    path = shared_data / "ecd" / "train" / "train_data.txt.sample"
    kept = list(preprocess(read_authors_contrastive(path, stats=stats), stats=stats))
    assert len(kept) == 1000
    assert stats["dialogues_read"] == stats["dialogues_kept"] == 1000
    assert stats["turns_merged"] == 0 and stats.dropped == {}


def test_stats_to_dict_and_atomic_json(tmp_path):
    stats = PrepStats()
    stats.increment("dialogues_read", 3)
    stats.increment("samples_written")
    stats.increment("skipped_non_positive", 2)
    stats.drop("too_few_turns")
    stats.malformed_line("field_count", "a.txt", 4)
    assert stats["tokens_truncated"] == 0
    expected = {
        "dialogues_read": 3, "dialogues_kept": 0, "blank_lines": 0, "empty_turns_skipped": 0, "turns_merged": 0,
        "samples_written": 1, "tokens_truncated": 0, "skipped_non_positive": 2,
        "dropped": {"too_few_turns": 1},
        "malformed_lines": 1,
        "malformed": {"field_count": {"count": 1, "examples": ["a.txt:4"]}},
    }
    assert stats.to_dict() == expected
    path = tmp_path / "run" / "stats.json"
    stats.write_json(path)
    stats.write_json(path)
    assert json.loads(path.read_text(encoding="utf-8")) == expected
    assert [p.name for p in path.parent.iterdir()] == ["stats.json"]
