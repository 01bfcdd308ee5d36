"""Dialogue-act sets: SGD's system turns read whole (counts, acts, the few-shot draws on them),
TOD-BERT's layout and input strings against hand-written ones, and every malformed input
refused naming its file and line."""

import collections
import json
import re

import pytest

from dialoguecse_tf.data.dialogue_acts import (ActExample, layout_of, read_act_dataset, release_input_text,
                                               tod_bert_context)
from dialoguecse_tf.evaluation.tasks.finetune_base import few_shot_split
from dialoguecse_tf.io_utils import DataFormatError

SGD_ACTS = ("CONFIRM", "INFORM", "INFORM_COUNT", "NOTIFY_FAILURE", "NOTIFY_SUCCESS", "OFFER", "OFFER_INTENT",
            "REQUEST", "REQ_MORE")


@pytest.fixture(scope="module")
def sgd(shared_data):
    return read_act_dataset(str(shared_data / "sgd"))


def test_sgd_gives_one_example_per_system_turn_a_user_answers(sgd, shared_data):
    # 111,878 user turns in train, 19,384 in dev; each dialogue's opening one has no system turn before it.
    assert (sgd.layout, len(sgd.train), len(sgd.test)) == ("sgd", 111878 - 12174, 19384 - 2098)
    assert sgd.labels == SGD_ACTS  # GOODBYE closes dialogues: no user turn follows it
    assert sgd.test_split.endswith("sgd/dev")
    counts = collections.Counter(sgd.labels[act] for example in sgd.test for act in example.acts)
    assert counts == {"OFFER": 4606, "REQUEST": 4042, "INFORM": 2767, "CONFIRM": 2461, "NOTIFY_SUCCESS": 1877,
                      "INFORM_COUNT": 1619, "REQ_MORE": 1370, "OFFER_INTENT": 989, "NOTIFY_FAILURE": 280}
    assert all(example.acts and list(example.acts) == sorted(set(example.acts)) for example in sgd.train)
    # The first example of SGD train's first dialogue, built by hand from its file.
    dialogue = json.loads((shared_data / "sgd" / "train" / "dialogues_001.json").read_text(encoding="utf-8"))[0]
    user, system, answer = (dialogue["turns"][i]["utterance"] for i in range(3))
    acts = sorted({action["act"] for frame in dialogue["turns"][1]["frames"] for action in frame["actions"]})
    assert sgd.train[0] == ActExample(f"[SYS]  [USR] {user} [SYS]  [SEP] {system} [USR] {answer}",
                                      tuple(SGD_ACTS.index(act) for act in acts))


@pytest.mark.parametrize("shots", [10, 20])
def test_sgd_few_shot_draws_per_act(sgd, shots):
    label_sets = [example.acts for example in sgd.train]
    train, validation = few_shot_split(label_sets, shots, 0)
    assert (train, validation) == few_shot_split(label_sets, shots, 0)
    assert few_shot_split(label_sets, shots, 1) != (train, validation)
    assert not set(train) & set(validation)
    drawn = collections.Counter(act for i in train + validation for act in sgd.train[i].acts)
    # Every act is drawn 2k times, less the items an earlier act's draw took, and the
    # examples carry other acts besides: no act has fewer than k training examples here.
    for act in range(len(SGD_ACTS)):
        assert sum(act in sgd.train[i].acts for i in train) >= shots // 2
        assert drawn[act] >= shots
    assert len(train) <= shots * len(SGD_ACTS) and len(validation) <= shots * len(SGD_ACTS)


def test_tod_bert_context_and_the_releases_input():
    text = tod_bert_context(["hello, welcome", "cheap food", "what area?", "north"], "how about x?", "yes")
    assert text == "[SYS] hello, welcome [USR] cheap food [SYS] what area? [USR] north [SYS]  [SEP] how about x? [USR] yes"
    # [USR] and [SYS] become [SEP]; the [SEP] after the system tag stays (data.py:315-317); the last 90 %.
    assert release_input_text(text, 10) == "[SEP] north [SEP] [SEP] how about x? [SEP] yes"
    assert release_input_text(tod_bert_context([], "hi there", "hello"), 32) == "[SEP] [SEP] hi there [SEP] hello"


def _write_tod_bert(folder, train, test, labels=("inform_food", "request_area", "bye")):
    folder.mkdir(parents=True, exist_ok=True)
    for name, dialogues in (("train.json", train), ("test.json", test)):
        (folder / name).write_text(json.dumps(dialogues, indent=1), encoding="utf-8")
    (folder / "labels.txt").write_text("".join(f"{label}\n" for label in labels), encoding="utf-8")
    return str(folder)


def _turn(speaker, text, label=()):
    return {"conv_id": "c", "speaker": speaker, "raw_text": text, "label": list(label)}


SYSTEM_FIRST = [_turn("[SYS]", "welcome ", ["bye"]), _turn("[USR]", "cheap food"),
                _turn("[SYS]", "which area?", ["request_area", "inform_food"]), _turn("[USR]", " north"),
                _turn("[SYS]", "goodbye", ["bye"])]
USER_FIRST = [_turn("[USR]", "hi"), _turn("[SYS]", "what food?", ["request_area"]), _turn("[USR]", "thai")]


def test_tod_bert_layout_reads_as_tod_berts_read_langs_turn(tmp_path):
    path = _write_tod_bert(tmp_path / "dstc2", [SYSTEM_FIRST, USER_FIRST], [USER_FIRST])
    dataset = read_act_dataset(path)
    assert (dataset.layout, dataset.labels) == ("tod_bert", ("inform_food", "request_area", "bye"))
    assert dataset.train == (
        ActExample(" [SYS]  [SEP] welcome [USR] cheap food", (2,)),  # TOD-BERT's spacing, kept
        ActExample("[SYS] welcome [USR] cheap food [SYS]  [SEP] which area? [USR] north", (0, 1)),
        ActExample("[SYS]  [USR] hi [SYS]  [SEP] what food? [USR] thai", (1,)),
    )
    assert dataset.test == (dataset.train[-1],) and dataset.test_split.endswith("test.json")
    assert layout_of(path) == "tod_bert"


def _second_item_line(first) -> int:
    """The line where the second item of `json.dumps([first, second], indent=1)` starts."""
    return len(json.dumps([first], indent=1).splitlines())


def _error(path) -> DataFormatError:
    with pytest.raises(DataFormatError) as caught:
        read_act_dataset(path)
    return caught.value


@pytest.mark.parametrize("dialogue, message", [
    ([{"speaker": "[SYS]", "raw_text": 3, "label": []}], "dialogue 2: turn 1: raw_text must be a string"),
    ([_turn("[BOT]", "x")], "dialogue 2: turn 1: speaker must be"),
    ([{"speaker": "[SYS]", "raw_text": "x", "label": "bye"}], "dialogue 2: turn 1: label must be a list"),
    ([_turn("[SYS]", "x", ["thanks"]), _turn("[USR]", "y")], r"dialogue 2: acts \['thanks'\] are not among"),
    ([_turn("[SYS]", "x", ["bye"]), _turn("[SYS]", "y", ["bye"])], "turn 2: expected a \\[USR\\] turn"),
    ([], "dialogue 2: a dialogue must be a non-empty list"),
])
def test_malformed_tod_bert_dialogues_name_file_and_line(tmp_path, dialogue, message):
    path = _write_tod_bert(tmp_path / "set", [SYSTEM_FIRST, dialogue], [USER_FIRST])
    error = _error(path)
    assert error.path.endswith("train.json") and error.line_number == _second_item_line(SYSTEM_FIRST)
    assert re.search(message, error.message)


def test_malformed_json_labels_and_layouts(tmp_path):
    path = _write_tod_bert(tmp_path / "a", [SYSTEM_FIRST], [USER_FIRST])
    (tmp_path / "a" / "test.json").write_text('[\n  [{"speaker": "[USR]",\n "raw_text": "x"}\n', encoding="utf-8")
    assert _error(path).path.endswith("test.json") and "invalid JSON" in str(_error(path))
    path = _write_tod_bert(tmp_path / "b", [SYSTEM_FIRST], [USER_FIRST], labels=("bye", "inform_food", "bye"))
    assert str(_error(path)).endswith("labels.txt:3: label 'bye' again (first on line 1)")
    path = _write_tod_bert(tmp_path / "c", [SYSTEM_FIRST], [USER_FIRST], labels=("bye", " "))
    assert str(_error(path)).endswith("labels.txt:2: an empty label")
    path = _write_tod_bert(tmp_path / "e", [SYSTEM_FIRST], [USER_FIRST])
    (tmp_path / "e" / "train.json").write_bytes(b'[\n[{"speaker": "\xff"}]]')
    assert str(_error(path)).endswith("train.json:2: invalid UTF-8 (invalid start byte at byte 16)")
    with pytest.raises(ValueError, match="TOD-BERT's universal_dialog_act layout"):
        read_act_dataset(str(tmp_path))
    path = _write_tod_bert(tmp_path / "d", [[_turn("[SYS]", "bye", ["bye"])]], [USER_FIRST])
    with pytest.raises(ValueError, match="its train split gives no example"):
        read_act_dataset(path)


def _write_sgd(folder, train, dev):
    for split, dialogues in (("train", train), ("dev", dev)):
        (folder / split).mkdir(parents=True)
        (folder / split / "dialogues_001.json").write_text(json.dumps(dialogues, indent=1), encoding="utf-8")
    return str(folder)


def _sgd_turn(speaker, text, acts=()):
    return {"speaker": speaker, "utterance": text, "frames": [{"service": "S_1", "actions": [
        {"act": act, "slot": "", "values": []} for act in acts]}]}


SGD_DIALOGUE = {"dialogue_id": "1_00000", "services": ["S_1"], "turns": [
    _sgd_turn("USER", "find food", ["INFORM_INTENT"]), _sgd_turn("SYSTEM", "where?", ["REQUEST", "REQUEST"]),
    _sgd_turn("USER", "here", ["INFORM"]), _sgd_turn("SYSTEM", "bye", ["GOODBYE"])]}


def test_sgd_layout_on_a_small_folder(tmp_path):
    dataset = read_act_dataset(_write_sgd(tmp_path, [SGD_DIALOGUE], [SGD_DIALOGUE]))
    assert dataset.labels == ("REQUEST",)
    assert dataset.train == dataset.test == (ActExample("[SYS]  [USR] find food [SYS]  [SEP] where? [USR] here",
                                                        (0,)),)


@pytest.mark.parametrize("turn, message", [
    ({"speaker": "BOT", "utterance": "x", "frames": []}, "turn 2: speaker must be USER or SYSTEM"),
    ({"speaker": "SYSTEM", "utterance": None, "frames": []}, "turn 2: utterance must be a string"),
    ({"speaker": "SYSTEM", "utterance": "x", "frames": [{"service": "S"}]}, "turn 2: frames must be a list"),
    ({"speaker": "SYSTEM", "utterance": "x", "frames": [{"actions": [{"act": ""}]}]}, "turn 2: every action needs"),
])
def test_malformed_sgd_dialogues_name_file_and_line(tmp_path, turn, message):
    bad = {**SGD_DIALOGUE, "dialogue_id": "1_00001", "turns": [SGD_DIALOGUE["turns"][0], turn]}
    error = _error(_write_sgd(tmp_path, [SGD_DIALOGUE], [SGD_DIALOGUE, bad]))
    assert error.path.endswith("dev/dialogues_001.json") and error.line_number == _second_item_line(SGD_DIALOGUE)
    assert message in error.message and error.message.startswith("dialogue 2 ('1_00001'): ")
