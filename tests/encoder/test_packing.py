"""The dialogue packing rule against a plain-Python reference."""

import numpy as np
import pytest

from dialoguecse_tf.encoder.packing import pack_dialogues, ragged_dialogues, speaker_roles
from dialoguecse_tf.encoder.tokenization import Tokenizer


def _reference(tokenizer, turns, roles, length, truncation, separators):
    pieces = [list(tokenizer.tokenize([turn])[0].numpy()) for turn in turns]
    sep = [tokenizer.sep_id] if separators else []
    kept = list(range(len(turns)))
    if truncation == "recent_turns":
        kept = []
        used = 1
        for index in range(len(turns) - 1, -1, -1):
            cost = len(pieces[index]) + len(sep)
            if used + cost > length and kept:
                break
            kept.insert(0, index)
            used += cost
    ids, role_ids, turn_ids = [tokenizer.cls_id], [roles[kept[0]]], [0]
    for position, index in enumerate(kept):
        turn = (pieces[index][:length - 1 - len(sep)] if truncation == "recent_turns" else pieces[index]) + sep
        ids += turn
        role_ids += [roles[index]] * len(turn)
        turn_ids += [position] * len(turn)
    untruncated = 1 + sum(len(p) + len(sep) for p in pieces)
    ids, role_ids, turn_ids = ids[:length], role_ids[:length], turn_ids[:length]
    pad = length - len(ids)
    return ids + [0] * pad, role_ids + [0] * pad, turn_ids + [0] * pad, [1] * len(ids) + [0] * pad, untruncated


@pytest.mark.parametrize("truncation", ["head", "recent_turns"])
@pytest.mark.parametrize("separators", [True, False])
@pytest.mark.parametrize("length", [6, 9, 12, 40])
def test_packing_keeps_the_first_tokens_or_the_most_recent_turns(tiny_vocab_file, length, separators, truncation):
    tokenizer = Tokenizer(tiny_vocab_file)
    dialogues = [
        ["hello where is my order", "the order is late", "i want a refund please", "thanks"],
        ["where is my package package package package package package", "hello"],
        ["i want to change the delivery address please please please please please"],
    ]
    roles = [[0, 1, 0, 1], [1, 0], [0]]
    packed = pack_dialogues(tokenizer, *ragged_dialogues(dialogues, roles), length, truncation, separators)
    for row, (turns, turn_roles) in enumerate(zip(dialogues, roles)):
        expected = _reference(tokenizer, turns, turn_roles, length, truncation, separators)
        for key, values in zip(("token_ids", "role_ids", "turn_ids", "padding_mask", "untruncated_length"), expected):
            np.testing.assert_array_equal(packed[key][row].numpy(), values,
                                          err_msg=f"{key} row {row} L={length} {truncation} sep={separators}")
    with pytest.raises(ValueError, match="truncation must be one of"):
        pack_dialogues(tokenizer, *ragged_dialogues(dialogues, roles), length, "tail")


def test_head_truncation_is_the_releases_first_tokens(tiny_vocab_file):
    # The release's BERT path cuts the joined sequence (data_provider.py:242): with 9 tokens the
    # third turn keeps its first word piece and the fourth is gone; "recent_turns" keeps the
    # last two turns whole instead.
    tokenizer = Tokenizer(tiny_vocab_file)
    turns, roles = ["hello", "the order is late", "refund please", "thanks"], [0, 1, 0, 1]
    head = pack_dialogues(tokenizer, *ragged_dialogues([turns], [roles]), 9)
    recent = pack_dialogues(tokenizer, *ragged_dialogues([turns], [roles]), 9, "recent_turns")
    assert tokenizer.ids_to_tokens(head["token_ids"][0].numpy()) == [
        "[CLS]", "hello", "[SEP]", "the", "order", "is", "late", "[SEP]", "refund"]
    assert list(head["turn_ids"][0].numpy()) == [0, 0, 0, 1, 1, 1, 1, 1, 2]
    assert tokenizer.ids_to_tokens(recent["token_ids"][0].numpy())[:6] == [
        "[CLS]", "refund", "please", "[SEP]", "thanks", "[SEP]"]
    assert int(head["untruncated_length"][0]) == int(recent["untruncated_length"][0]) == 13


def test_speaker_roles_follow_first_appearance_and_need_two_speakers():
    assert speaker_roles(["USER", "SYSTEM", "USER", "USER"]) == [0, 1, 0, 0]
    with pytest.raises(ValueError, match="d7: dial2vec needs exactly two interlocutors, found 1"):
        speaker_roles(["USER", "USER"], "d7")
    with pytest.raises(ValueError, match="found 3"):
        speaker_roles(["a", "b", "c"])
    with pytest.raises(ValueError, match="one role per turn"):
        ragged_dialogues([["a", "b"]], [[0]])
