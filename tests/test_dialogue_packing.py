"""The dialogue packing rule against a plain-Python reference."""

import numpy as np
import pytest

from dialoguecse_tf.dialogue_packing import pack_dialogues, ragged_dialogues, speaker_roles
from dialoguecse_tf.tokenization import Tokenizer


def _reference(tokenizer, turns, roles, length):
    pieces = [list(tokenizer.tokenize([turn])[0].numpy()) for turn in turns]
    kept = []
    used = 1
    for index in range(len(turns) - 1, -1, -1):
        cost = len(pieces[index]) + 1
        if used + cost > length and kept:
            break
        kept.insert(0, index)
        used += cost
    ids, segments, turn_ids = [tokenizer.cls_id], [roles[kept[0]]], [0]
    for position, index in enumerate(kept):
        turn = pieces[index][:length - 2] + [tokenizer.sep_id]
        ids += turn
        segments += [roles[index]] * len(turn)
        turn_ids += [position] * len(turn)
    pad = length - len(ids)
    return ids + [0] * pad, segments + [0] * pad, turn_ids + [0] * pad, [1] * len(ids) + [0] * pad


@pytest.mark.parametrize("length", [6, 9, 12, 40])
def test_packing_keeps_the_most_recent_turns(tiny_vocab_file, length):
    tokenizer = Tokenizer(tiny_vocab_file)
    dialogues = [
        ["hello where is my order", "the order is late", "i want a refund please", "thanks"],
        ["where is my package package package package package package", "hello"],
        ["i want to change the delivery address please please please please please"],
    ]
    roles = [[0, 1, 0, 1], [1, 0], [0]]
    packed = pack_dialogues(tokenizer, *ragged_dialogues(dialogues, roles), length)
    for row, (turns, turn_roles) in enumerate(zip(dialogues, roles)):
        expected = _reference(tokenizer, turns, turn_roles, length)
        for key, values in zip(("token_ids", "segment_ids", "turn_ids", "padding_mask"), expected):
            np.testing.assert_array_equal(packed[key][row].numpy(), values, err_msg=f"{key} row {row} L={length}")


def test_speaker_roles_follow_first_appearance_and_need_two_speakers():
    assert speaker_roles(["USER", "SYSTEM", "USER", "USER"]) == [0, 1, 0, 0]
    with pytest.raises(ValueError, match="d7: dial2vec needs exactly two interlocutors, found 1"):
        speaker_roles(["USER", "USER"], "d7")
    with pytest.raises(ValueError, match="found 3"):
        speaker_roles(["a", "b", "c"])
    with pytest.raises(ValueError, match="one role per turn"):
        ragged_dialogues([["a", "b"]], [[0]])
