"""Corpus readers: the authors' real sample, every malformed-line case, MDC, ECD, JDDC, SGD and JSONL
(the Self-dialogue reader: test_readers_self_dialogue.py)."""

import json
import pickle
import re

import pytest
from absl import flags

from dialoguecse_tf.cli.flag_utils import PrivateFlags, define_corpus_flags
from dialoguecse_tf.data.dialogue import Dialogue, Turn, turn_intent
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import (
    READERS,
    Reader,
    default_min_turns,
    read_authors_contrastive,
    read_corpus,
    read_ecd_release,
    read_jddc_chat,
    read_jsonl,
    read_mdc_tsv,
    read_sgd,
    write_jsonl,
)
from dialoguecse_tf.io_utils import DataFormatError

N_CANDIDATES = 50


def authors_line(left, right, roles, candidates=None, labels=None, label="1"):
    """One line of the authors' format; candidates default to 50 with the response first."""
    candidates = candidates if candidates is not None else ["回复"] + [f"负例{i}" for i in range(1, N_CANDIDATES)]
    labels = labels if labels is not None else ["1"] + ["0"] * (len(candidates) - 1)
    return "\t".join(["|".join(left), "|".join(right), roles, label, "|".join(candidates), "|".join(labels)])


GOOD = authors_line(["你好", "在的亲"], ["好的"], "0|1-0-1")


def write_lines(path, lines):
    """Lines may be str (written as UTF-8) or bytes (written raw)."""
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n" for line in lines))
    return path


# ---------------------------------------------------------------- authors' format, real sample


@pytest.fixture(scope="module")
def real_sample(shared_data):
    path = shared_data / "ecd" / "train" / "train_data.txt.sample"
    stats = PrepStats()
    dialogues = list(read_authors_contrastive(path, stats=stats))
    raw_lines = path.read_text(encoding="utf-8").splitlines()
    return path, dialogues, raw_lines, stats


def test_real_sample_reads_every_line(real_sample):
    path, dialogues, raw_lines, stats = real_sample
    assert len(raw_lines) == 1000
    assert len(dialogues) == 1000
    assert stats["dialogues_read"] == 1000
    assert stats.malformed == {} and stats["blank_lines"] == 0
    assert [d.line_number for d in dialogues] == list(range(1, 1001))
    assert all(d.source == str(path) for d in dialogues)


def test_real_sample_structure_matches_the_raw_fields(real_sample):
    _, dialogues, raw_lines, _ = real_sample
    for dialogue, line in zip(dialogues, raw_lines):
        left, right, roles, label, candidates, labels = line.split("\t")
        n_left, n_right = len(left.split("|")), len(right.split("|"))
        assert len(dialogue.candidates) == N_CANDIDATES
        assert dialogue.candidates == tuple(candidates.split("|"))
        assert dialogue.candidate_labels == (1,) + (0,) * (N_CANDIDATES - 1)
        assert dialogue.response_index == n_left
        assert len(dialogue.turns) == n_left + 1 + n_right
        assert dialogue.turns[dialogue.response_index].text == dialogue.candidates[0]
        assert [t.text for t in dialogue.turns] == left.split("|") + [candidates.split("|")[0]] + right.split("|")
        # L + R - 1 role entries: the shared "a-b-c" entry covers three turns.
        assert len(roles.split("|")) == n_left + n_right - 1
        assert "".join(t.speaker for t in dialogue.turns) == roles.replace("|", "").replace("-", "")
        assert all(t.intent is None for t in dialogue.turns)


def test_real_sample_first_line(real_sample):
    _, dialogues, _, _ = real_sample
    first = dialogues[0]
    assert first.dialogue_id == "train_data.txt-1"
    assert [t.speaker for t in first.turns] == list("1010101010101")  # "1|0|1|0|1|0|1|0|1-0-1|0|1"
    assert first.response_index == 9
    assert first.turns[9] == Turn("0", "好的谢谢亲")
    assert first.turns[10].text == "不客气的礼盒最近仓库库存不够可能要后天发的哦"


# ---------------------------------------------------------------- authors' format, synthetic


@pytest.mark.parametrize(
    "left, right, roles, speakers, response_index",
    [
        (["a", "b"], ["c", "d"], "0|1-0-1|0", "01010", 2),
        ([], ["c", "d"], "0-1|0", "010", 0),
        (["a", "b"], [], "0|1-0", "010", 2),
        ([], [], "1", "1", 0),
    ],
    ids=["both", "left-empty", "right-empty", "both-empty"],
)
def test_authors_role_forms(tmp_path, left, right, roles, speakers, response_index):
    path = write_lines(tmp_path / "train.txt", [authors_line(left, right, roles)])
    (dialogue,) = read_authors_contrastive(path)
    assert "".join(t.speaker for t in dialogue.turns) == speakers
    assert dialogue.response_index == response_index
    assert [t.text for t in dialogue.turns] == left + ["回复"] + right


BAD_AUTHORS_LINES = {
    "field_count": GOOD.rsplit("\t", 1)[0],
    "empty_utterance": authors_line(["你好", ""], ["好的"], "0|1-0-1"),
    "blank_candidate": authors_line(["你好"], ["好的"], "0-1-0", candidates=["回复", "  "], labels=["1", "0"]),
    "non_numeric_label": authors_line(["你好"], ["好的"], "0-1-0", label="yes"),
    "non_numeric_candidate_label": authors_line(["你好"], ["好的"], "0-1-0", candidates=["回复", "x"], labels=["1", "o"]),
    "label_count": authors_line(["你好"], ["好的"], "0-1-0", candidates=["回复", "x", "y"], labels=["1", "0"]),
    "first_label_not_1": authors_line(["你好"], ["好的"], "0-1-0", candidates=["回复", "x"], labels=["0", "1"]),
    "two_positive_labels": authors_line(["你好"], ["好的"], "0-1-0", candidates=["回复", "x"], labels=["1", "1"]),
    "role_count": authors_line(["你好", "在吗"], ["好的"], "0-1-0"),
    "bad_role_value": authors_line(["你好"], ["好的"], "0-2-0"),
    "shared_entry_too_short": authors_line(["你好"], ["好的"], "0-1"),
    "invalid_utf8": GOOD.encode("utf-8").replace("你好".encode("utf-8"), b"\xe4\xbd"),
}
EXPECTED_REASON = {
    "field_count": "field_count",
    "empty_utterance": "empty_utterance",
    "blank_candidate": "empty_utterance",
    "non_numeric_label": "bad_label",
    "non_numeric_candidate_label": "bad_label",
    "label_count": "label_count",
    "first_label_not_1": "bad_label",
    "two_positive_labels": "bad_label",
    "role_count": "role_count",
    "bad_role_value": "bad_roles",
    "shared_entry_too_short": "bad_roles",
    "invalid_utf8": "invalid_utf8",
}


@pytest.mark.parametrize("case", sorted(BAD_AUTHORS_LINES))
def test_authors_malformed_line_raises_with_location(tmp_path, case):
    # The blank line counts towards numbering: the bad line is line 3.
    path = write_lines(tmp_path / "train.txt", [GOOD, "", BAD_AUTHORS_LINES[case], GOOD])
    reader = read_authors_contrastive(path)
    assert next(reader).line_number == 1
    with pytest.raises(DataFormatError) as info:
        next(reader)
    error = info.value
    assert (error.path, error.line_number, error.reason) == (str(path), 3, EXPECTED_REASON[case])
    assert str(error).startswith(f"{path}:3: ")


@pytest.mark.parametrize("case", sorted(BAD_AUTHORS_LINES))
def test_authors_malformed_line_skipped_and_counted(tmp_path, case):
    path = write_lines(tmp_path / "train.txt", [GOOD, "", BAD_AUTHORS_LINES[case], GOOD, "   "])
    stats = PrepStats()
    dialogues = list(read_authors_contrastive(path, skip_malformed=True, stats=stats))
    assert [d.line_number for d in dialogues] == [1, 4]
    assert stats["dialogues_read"] == 2
    assert stats["blank_lines"] == 2
    assert stats.malformed == {EXPECTED_REASON[case]: {"count": 1, "examples": [f"{path}:3"]}}


def test_malformed_examples_are_capped(tmp_path):
    path = write_lines(tmp_path / "train.txt", ["bad"] * 25)
    stats = PrepStats()
    assert list(read_authors_contrastive(path, skip_malformed=True, stats=stats)) == []
    assert stats.malformed["field_count"]["count"] == 25
    assert stats.malformed["field_count"]["examples"] == [f"{path}:{i}" for i in range(1, 11)]
    assert stats.malformed_lines == 25


def test_crlf_and_bom_are_tolerated(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(b"\xef\xbb\xbf" + (GOOD + "\r\n" + GOOD + "\r\n").encode("utf-8"))
    dialogues = list(read_authors_contrastive(path))
    assert len(dialogues) == 2
    assert dialogues[0].turns[0].text == "你好"
    assert dialogues[1].candidate_labels[-1] == 0


def test_data_format_error_pickles():
    error = pickle.loads(pickle.dumps(DataFormatError("a.txt", 7, "broken", reason="field_count")))
    assert (str(error), error.reason, error.line_number) == ("a.txt:7: broken", "field_count", 7)
    assert isinstance(error, ValueError)


# ---------------------------------------------------------------- MDC raw TSV

MDC_HEADER = "session.ID\tMessage.ID\tMessage.Timestamp\tMessage.From\tMessage.Text\tDialog.Acts"
MDC_ROWS = [
    # Session 1's rows are out of Message.ID order on purpose.
    "1\t1\tSat Jul 23 12:23:35 PDT 2016\tuser\ti want to watch a movie tonight\trequest(ticket;starttime=tonight)",
    "1\t3\tSat Jul 23 12:24:40 PDT 2016\tuser\tseattle please\tinform(city=Seattle)",
    "1\t2\tSat Jul 23 12:24:02 PDT 2016\tagent\twhich city are you in?\trequest(city)",
    "1\t4\tSat Jul 23 12:25:11 PDT 2016\tagent\tzootopia is playing at 7pm at regal\t"
    "inform(moviename=zootopia;starttime=7pm)\tinform(theater=regal)\trequest(numberofpeople)",
    "1\t5\tSat Jul 23 12:25:30 PDT 2016\tuser\tthanks, bye\t",
    "2\t1\tSun Jul 24 09:01:00 PDT 2016\tuser\tbook a table for two\trequest(reservation;numberofpeople=2)\tgreeting(greeting=hi)",
    "2\t2\tSun Jul 24 09:01:20 PDT 2016\tagent\twhat time?\trequest(starttime)",
]


def write_mdc(tmp_path, rows, name="movie_all.tsv"):
    return write_lines(tmp_path / name, [MDC_HEADER] + rows)


def test_mdc_sessions_order_and_intents(tmp_path):
    path = write_mdc(tmp_path, MDC_ROWS)
    stats = PrepStats()
    first, second = read_mdc_tsv(path, stats=stats)
    assert stats["dialogues_read"] == 2
    assert (first.dialogue_id, first.line_number, first.source) == ("movie_all-1", 2, str(path))
    assert [t.speaker for t in first.turns] == ["user", "agent", "user", "agent", "user"]
    assert [t.text for t in first.turns] == [
        "i want to watch a movie tonight",
        "which city are you in?",
        "seattle please",
        "zootopia is playing at 7pm at regal",
        "thanks, bye",
    ]
    # One intent per message, its first act: row 4 carries inform, inform, request.
    assert [t.intent for t in first.turns] == ["request", "request", "inform", "inform", None]
    assert first.response_index is None and first.candidates is None
    assert second.dialogue_id == "movie_all-2" and second.line_number == 7
    assert [t.intent for t in second.turns] == ["request", "request"]


def test_turn_intent_is_the_first_act():
    assert turn_intent(["greeting", "request", "greeting"]) == "greeting"
    assert turn_intent(iter(["INFORM", "INFORM_INTENT"])) == "INFORM"
    assert turn_intent([]) is None


BAD_MDC_ROWS = {
    "field_count": ("1\t2\tSat Jul 23\tagent", "field_count"),
    "message_id": ("1\tx\tSat Jul 23\tagent\twhich city?\trequest(city)", "bad_message_id"),
    "speaker": ("1\t2\tSat Jul 23\tbot\twhich city?\trequest(city)", "bad_speaker"),
    "act": ("1\t2\tSat Jul 23\tagent\twhich city?\trequest city", "bad_dialogue_act"),
}


@pytest.mark.parametrize("case", sorted(BAD_MDC_ROWS))
def test_mdc_malformed_rows(tmp_path, case):
    row, reason = BAD_MDC_ROWS[case]
    path = write_mdc(tmp_path, [MDC_ROWS[0], row, MDC_ROWS[1]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:3: ") as info:
        list(read_mdc_tsv(path))
    assert info.value.reason == reason

    stats = PrepStats()
    (dialogue,) = read_mdc_tsv(path, skip_malformed=True, stats=stats)
    assert [t.text for t in dialogue.turns] == ["i want to watch a movie tonight", "seattle please"]
    assert stats.malformed == {reason: {"count": 1, "examples": [f"{path}:3"]}}


def test_mdc_empty_message_is_skipped_and_counted(tmp_path):
    # Message.From names every row's speaker, so an empty message can go without shifting any.
    empty = "1\t2\tSat Jul 23\tagent\t \trequest(city)"
    path = write_mdc(tmp_path, [MDC_ROWS[0], empty, MDC_ROWS[1], "3\t1\tSat Jul 23\tuser\t\t"])
    stats = PrepStats()
    (dialogue,) = read_mdc_tsv(path, stats=stats)
    assert [(t.speaker, t.text) for t in dialogue.turns] == [("user", "i want to watch a movie tonight"),
                                                             ("user", "seattle please")]
    assert stats["empty_turns_skipped"] == 2 and stats["dialogues_read"] == 1 and stats.malformed == {}


def test_mdc_non_contiguous_session(tmp_path):
    path = write_mdc(tmp_path, [MDC_ROWS[0], MDC_ROWS[5], MDC_ROWS[1]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:4: .*not contiguous"):
        list(read_mdc_tsv(path))
    stats = PrepStats()
    assert [len(d.turns) for d in read_mdc_tsv(path, skip_malformed=True, stats=stats)] == [1, 1]
    assert stats.malformed["non_contiguous_session"]["count"] == 1


def test_mdc_bad_header_always_raises(tmp_path):
    path = write_lines(tmp_path / "x.tsv", ["id\ttext", MDC_ROWS[0]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:1: MDC header") as info:
        list(read_mdc_tsv(path, skip_malformed=True))
    assert info.value.reason == "bad_header"


def test_mdc_empty_file(tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_bytes(b"")
    assert list(read_mdc_tsv(path)) == []


# ---------------------------------------------------------------- ECD release


def test_ecd_release_keeps_positive_lines(tmp_path):
    path = write_lines(tmp_path / "train.txt", [
        "1\t你好 在 吗\t在 的 亲\t有 优惠 吗\t亲 现在 下单 有 优惠 哦",
        "0\t你好 在 吗\t在 的 亲\t有 优惠 吗\t好 的",
        "1\t发 什么 快递\t默认 韵达",
        "",
    ])
    stats = PrepStats()
    first, second = read_ecd_release(path, stats=stats)
    assert stats["dialogues_read"] == 2
    assert stats["skipped_non_positive"] == 1
    assert stats["blank_lines"] == 1
    assert stats.malformed == {}
    assert [t.text for t in first.turns] == ["你好 在 吗", "在 的 亲", "有 优惠 吗", "亲 现在 下单 有 优惠 哦"]
    assert [t.speaker for t in first.turns] == ["0", "1", "0", "1"]
    assert [t.speaker for t in second.turns] == ["0", "1"]
    (odd,) = read_ecd_release(write_lines(tmp_path / "odd.txt", ["1\ta\tb\tc"]))
    assert [t.speaker for t in odd.turns] == ["1", "0", "1"]
    assert (first.dialogue_id, second.line_number) == ("train-1", 3)


@pytest.mark.parametrize("line, reason", [
    ("2\ta\tb", "bad_label"),
    ("x\ta\tb", "bad_label"),
    ("1\tonly", "field_count"),
    ("1\ta\t\tb", "empty_utterance"),
])
def test_ecd_release_malformed(tmp_path, line, reason):
    path = write_lines(tmp_path / "train.txt", ["1\ta\tb", line])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:2: ") as info:
        list(read_ecd_release(path))
    assert info.value.reason == reason
    stats = PrepStats()
    assert len(list(read_ecd_release(path, skip_malformed=True, stats=stats))) == 1
    assert stats.malformed[reason]["count"] == 1
    assert stats["skipped_non_positive"] == 0


# ---------------------------------------------------------------- JDDC chat.txt

# session_id, user_id, waiter_send, is_transfer, is_repeat, sku, content (readers/jddc.py cites the source).
JDDC_ROWS = [
    "a1f3\tUSERID_101\t0\t0\t1\tnan\t你好 在吗",
    "a1f3\tUSERID_101\t1\t0\t1\tnan\t在的亲，请问有什么可以帮您?",
    "a1f3\tUSERID_101\t0\t0\t1\tnan\t我的订单[订单x]什么时候发货",
    "a1f3\tUSERID_101\t0\t0\t1\tnan\t急用",
    # A tab inside the content splits it into an eighth field.
    "a1f3\tUSERID_101\t1\t0\t1\tnan\t今天下午发出\t请您耐心等待",
    "b7c2\tUSERID_202\t0\t0\t0\t3660624\t[链接x] 这个有货吗",
    "b7c2\tUSERID_202\t1\t1\t0\tnan\t有货的亲",
]
JDDC_HEADER = "session_id\tuser_id\twaiter_send\tis_transfer\tis_repeat\tsku\tcontent"


def test_jddc_sessions_speakers_and_texts(tmp_path):
    path = write_lines(tmp_path / "chat.txt", JDDC_ROWS)
    stats = PrepStats()
    first, second = read_jddc_chat(path, stats=stats)
    assert stats["dialogues_read"] == 2 and stats["header_lines"] == 0 and stats.malformed == {}
    assert (first.dialogue_id, first.line_number, first.source) == ("a1f3", 1, str(path))
    assert [t.speaker for t in first.turns] == ["user", "agent", "user", "user", "agent"]
    assert [t.text for t in first.turns] == ["你好 在吗", "在的亲，请问有什么可以帮您?", "我的订单[订单x]什么时候发货",
                                             "急用", "今天下午发出\t请您耐心等待"]
    assert all(t.intent is None for t in first.turns + second.turns)
    assert (second.dialogue_id, second.line_number) == ("b7c2", 6)
    assert [(t.speaker, t.text) for t in second.turns] == [("user", "[链接x] 这个有货吗"), ("agent", "有货的亲")]
    assert read_corpus(path, "jddc").__next__().turns == first.turns


def test_jddc_header_line_is_skipped_and_counted(tmp_path):
    path = write_lines(tmp_path / "chat.txt", [JDDC_HEADER] + JDDC_ROWS)
    stats = PrepStats()
    first, second = read_jddc_chat(path, stats=stats)
    assert stats["header_lines"] == 1
    assert (first.line_number, len(first.turns), second.line_number) == (2, 5, 7)


BAD_JDDC_ROWS = {
    "field_count": ("a1f3\tUSERID_101\t1\t0\t1\tnan", "field_count"),
    "waiter_send": ("a1f3\tUSERID_101\t2\t0\t1\tnan\t好的", "bad_speaker"),
    "empty_session": ("\tUSERID_101\t1\t0\t1\tnan\t好的", "bad_session_id"),
}


@pytest.mark.parametrize("case", sorted(BAD_JDDC_ROWS))
def test_jddc_malformed_rows(tmp_path, case):
    row, reason = BAD_JDDC_ROWS[case]
    path = write_lines(tmp_path / "chat.txt", [JDDC_ROWS[0], row, JDDC_ROWS[1]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:2: ") as info:
        list(read_jddc_chat(path))
    assert info.value.reason == reason
    stats = PrepStats()
    (dialogue,) = read_jddc_chat(path, skip_malformed=True, stats=stats)
    assert [t.speaker for t in dialogue.turns] == ["user", "agent"]
    assert stats.malformed == {reason: {"count": 1, "examples": [f"{path}:2"]}}


def test_jddc_empty_content_is_skipped_and_counted(tmp_path):
    path = write_lines(tmp_path / "chat.txt", [JDDC_ROWS[0], "a1f3\tUSERID_101\t1\t0\t1\tnan\t  ", JDDC_ROWS[1]])
    stats = PrepStats()
    (dialogue,) = read_jddc_chat(path, stats=stats)
    assert [t.speaker for t in dialogue.turns] == ["user", "agent"]
    assert stats["empty_turns_skipped"] == 1 and stats.malformed == {}


def test_jddc_non_contiguous_session(tmp_path):
    path = write_lines(tmp_path / "chat.txt", [JDDC_ROWS[0], JDDC_ROWS[5], JDDC_ROWS[1]])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:3: .*not contiguous"):
        list(read_jddc_chat(path))


# ---------------------------------------------------------------- SGD


@pytest.fixture(scope="module")
def sgd_dev(shared_data):
    folder = shared_data / "sgd" / "dev"
    stats = PrepStats()
    return folder, list(read_sgd(folder, stats=stats)), stats


def test_sgd_real_dev_folder(sgd_dev):
    folder, dialogues, stats = sgd_dev
    files = sorted(folder.glob("dialogues_*.json"))
    raw = [d for path in files for d in json.loads(path.read_text(encoding="utf-8"))]
    # The data README: 2,098 dialogues, 836 of them single-service.
    assert len(dialogues) == len(raw) == stats["dialogues_read"] == 2098
    assert stats.malformed == {}
    assert sum(len(d.services) == 1 for d in dialogues) == 836
    assert len({d.dialogue_id for d in dialogues}) == 2098
    for dialogue, original in zip(dialogues, raw):
        assert dialogue.dialogue_id == original["dialogue_id"]
        assert dialogue.services == tuple(original["services"])
        assert [t.text for t in dialogue.turns] == [t["utterance"] for t in original["turns"]]
        assert [t.speaker for t in dialogue.turns] == [t["speaker"] for t in original["turns"]]
        first_acts = [next((a["act"] for f in t["frames"] for a in f["actions"]), None) for t in original["turns"]]
        assert [t.intent for t in dialogue.turns] == first_acts
    assert dialogues[0].source == str(files[0]) and dialogues[-1].source == str(files[-1])
    intents = {t.intent for d in dialogues for t in d.turns}
    # The first-act rule over SGD's 18 acts: INFORM_COUNT is never a turn's first act in dev.
    assert len(intents) == 17 and None not in intents and "INFORM_COUNT" not in intents


def test_sgd_file_and_folder_agree(sgd_dev):
    folder, dialogues, _ = sgd_dev
    one_file = list(read_corpus(folder / "dialogues_001.json", "sgd"))
    assert one_file == dialogues[:len(one_file)]
    # A glob reads the files it matches, in name order, as the folder does.
    first_two = list(read_corpus(str(folder / "dialogues_00[12].json"), "sgd"))
    assert len(first_two) > len(one_file) and first_two == dialogues[:len(first_two)]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        list(read_corpus(str(folder / "dialogues_9??.json"), "sgd"))


def _sgd_dialogue(dialogue_id, speakers=("USER", "SYSTEM"), **changes):
    turns = [{"speaker": speaker, "utterance": f"utterance {i}",
              "frames": [{"service": "Hotels_1", "actions": [{"act": "INFORM", "slot": "", "values": []},
                                                             {"act": "REQUEST", "slot": "", "values": []}]}]}
             for i, speaker in enumerate(speakers)]
    dialogue = {"dialogue_id": dialogue_id, "services": ["Hotels_1"], "turns": turns}
    dialogue.update(changes)
    return dialogue


def test_sgd_pretty_printed_file_locates_dialogues(tmp_path):
    path = tmp_path / "dialogues_001.json"
    path.write_text(json.dumps([_sgd_dialogue("1_00000"), _sgd_dialogue("1_00001", frames=None)], indent=2))
    first, second = read_sgd(path)
    text = path.read_text().splitlines()
    assert first.line_number == 2 and text[second.line_number - 1].strip() == "{"
    assert second.line_number > first.line_number + 10
    assert [t.intent for t in first.turns] == ["INFORM", "INFORM"]
    assert first.services == ("Hotels_1",)


def test_sgd_release_empty_goodbye_turn_is_skipped_and_counted(tmp_path):
    # As SGD's public release has them: a closing SYSTEM turn with an empty utterance whose only
    # act is GOODBYE. SGD names every turn's speaker, so dropping it shifts nothing.
    released = _sgd_dialogue("1_00000", speakers=("USER", "SYSTEM", "USER", "SYSTEM"))
    released["turns"][-1].update(utterance="", frames=[{
        "actions": [{"act": "GOODBYE", "canonical_values": [], "slot": "", "values": []}],
        "service": "Hotels_1", "slots": []}])
    path = tmp_path / "dialogues_001.json"
    path.write_text(json.dumps([released, _sgd_dialogue("1_00001")], indent=2))
    stats = PrepStats()
    first, second = read_sgd(tmp_path, stats=stats)
    assert [t.text for t in first.turns] == ["utterance 0", "utterance 1", "utterance 2"]
    assert [t.speaker for t in first.turns] == ["USER", "SYSTEM", "USER"]
    assert len(second.turns) == 2
    assert stats["empty_turns_skipped"] == 1 and stats["dialogues_read"] == 2 and stats.malformed == {}


def _bad_turn(**changes):
    turn = {"speaker": "USER", "utterance": "hi", "frames": [{"actions": [{"act": "INFORM"}]}]}
    turn.update(changes)
    return _sgd_dialogue("1_00007", turns=[turn])


BAD_SGD = {
    "speaker": (_sgd_dialogue("1_00007", speakers=("USER", "BOT")), "bad_speaker"),
    "lower_case_speaker": (_sgd_dialogue("1_00007", speakers=("user",)), "bad_speaker"),
    "not_an_object": ([1, 2], "bad_dialogue"),
    "no_id": (_sgd_dialogue(""), "bad_dialogue_id"),
    "no_services": (_sgd_dialogue("1_00007", services=[]), "bad_services"),
    "no_turns": (_sgd_dialogue("1_00007", turns=[]), "missing_turns"),
    "only_empty_utterances": (_bad_turn(utterance=" "), "empty_utterance"),
    "numeric_utterance": (_bad_turn(utterance=3), "bad_turn"),
    "frames_not_a_list": (_bad_turn(frames={}), "bad_frames"),
    "frame_without_actions": (_bad_turn(frames=[{"service": "Hotels_1"}]), "bad_frames"),
    "action_without_act": (_bad_turn(frames=[{"actions": [{"slot": "city"}]}]), "bad_frames"),
}


@pytest.mark.parametrize("case", sorted(BAD_SGD))
def test_sgd_malformed_dialogue_names_file_and_dialogue(tmp_path, case):
    bad, reason = BAD_SGD[case]
    path = tmp_path / "dialogues_002.json"
    path.write_text(json.dumps([_sgd_dialogue("1_00000"), bad, _sgd_dialogue("1_00002")]))
    with pytest.raises(DataFormatError) as info:
        list(read_sgd(path))
    named = "dialogue 2 ('1_00007')" if reason not in ("bad_dialogue", "bad_dialogue_id") else "dialogue 2:"
    assert str(info.value).startswith(f"{path}:1: {named}")
    assert info.value.reason == reason
    stats = PrepStats()
    assert [d.dialogue_id for d in read_sgd(path, skip_malformed=True, stats=stats)] == ["1_00000", "1_00002"]
    assert stats.malformed == {reason: {"count": 1, "examples": [f"{path}:1"]}}
    assert stats["dialogues_read"] == 2


@pytest.mark.parametrize("text, line", [
    ("", 1),
    ('{"dialogue_id": "1_00000"}', 1),
    ('[{"dialogue_id": "1_00000"},\n {"dialogue_id": ]', 2),
    ('[{"dialogue_id": "1_00000"} {}]', 1),
    ("[{}, ]", 1),
    ("[]\n\n]", 3),
])
def test_sgd_file_that_is_no_json_list_always_raises(tmp_path, text, line):
    path = tmp_path / "dialogues_003.json"
    path.write_text(text)
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:{line}: ") as info:
        list(read_sgd(path, skip_malformed=True))
    assert info.value.reason == "bad_json"


def test_sgd_invalid_utf8_and_empty_folder(tmp_path):
    path = tmp_path / "dialogues_004.json"
    path.write_bytes(b'[\n{"dialogue_id": "\xff"}]')
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:2: invalid UTF-8"):
        list(read_sgd(path))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "schema.json").write_text("[]")
    with pytest.raises(FileNotFoundError, match="no dialogues_"):
        list(read_sgd(tmp_path / "empty"))
    assert list(read_sgd(write_lines(tmp_path / "dialogues_005.json", ["[ ]"]))) == []


# ---------------------------------------------------------------- JSONL


def test_jsonl_round_trip(tmp_path):
    dialogues = [
        Dialogue("d1", (Turn("user", "I need a taxi", "request"), Turn("agent", "Where to?", None),
                        Turn("user", "机场", "inform")), services=("Taxi_1",)),
        Dialogue("d2", (Turn("0", "你好"), Turn("1", "在的"), Turn("0", "好的")), response_index=1,
                 candidates=("在的", "不在"), candidate_labels=(1, 0)),
    ]
    path = tmp_path / "out" / "corpus.jsonl"
    assert write_jsonl(iter(dialogues), path) == 2
    assert "机场" in path.read_text(encoding="utf-8")
    assert [p.name for p in path.parent.iterdir()] == ["corpus.jsonl"]
    stats = PrepStats()
    read_back = list(read_jsonl(path, stats=stats))
    assert [
        (d.dialogue_id, d.turns, d.response_index, d.candidates, d.candidate_labels, d.services) for d in read_back
    ] == [(d.dialogue_id, d.turns, d.response_index, d.candidates, d.candidate_labels, d.services) for d in dialogues]
    assert [d.line_number for d in read_back] == [1, 2]
    assert stats["dialogues_read"] == 2


def test_jsonl_real_sample_round_trip(real_sample, tmp_path):
    _, dialogues, _, _ = real_sample
    path = tmp_path / "authors.jsonl"
    write_jsonl(dialogues[:100], path)
    read_back = list(read_jsonl(path))
    assert [(d.turns, d.response_index, d.candidates, d.candidate_labels) for d in read_back] == [
        (d.turns, d.response_index, d.candidates, d.candidate_labels) for d in dialogues[:100]]


def test_jsonl_default_id_and_optional_intent(tmp_path):
    path = write_lines(tmp_path / "mine.jsonl", [
        "",
        json.dumps({"turns": [{"speaker": "a", "text": "hi"}, {"speaker": "b", "text": "yo", "intent": None}],
                    "extra": 1}),
    ])
    (dialogue,) = read_jsonl(path)
    assert dialogue.dialogue_id == "mine-2"
    assert dialogue.turns == (Turn("a", "hi"), Turn("b", "yo"))


def test_jsonl_empty_turn_is_skipped_and_response_index_follows(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [json.dumps({
        "turns": [{"speaker": "a", "text": "hi"}, {"speaker": "b", "text": " "}, {"speaker": "b", "text": "yo"},
                  {"speaker": "a", "text": ""}, {"speaker": "a", "text": "bye"}],
        "response_index": 2, "candidates": ["yo", "no"], "candidate_labels": [1, 0]})])
    stats = PrepStats()
    (dialogue,) = read_jsonl(path, stats=stats)
    assert dialogue.turns == (Turn("a", "hi"), Turn("b", "yo"), Turn("a", "bye"))
    assert dialogue.response_index == 1 and dialogue.turns[1].text == dialogue.candidates[0]
    assert stats["empty_turns_skipped"] == 2


BAD_JSONL = {
    "bad_json": ('{"turns": [', "bad_json"),
    "not_an_object": ("[1, 2]", "bad_json"),
    "missing_turns": ('{"dialogue_id": "x"}', "missing_turns"),
    "empty_turns": ('{"turns": []}', "missing_turns"),
    "only_empty_texts": ('{"turns": [{"speaker": "a", "text": " "}]}', "empty_utterance"),
    "empty_response": ('{"turns": [{"speaker": "a", "text": "hi"}, {"speaker": "b", "text": ""}], "response_index": 1, '
                       '"candidates": ["x"], "candidate_labels": [1]}', "bad_candidates"),
    "missing_speaker": ('{"turns": [{"text": "hi"}]}', "bad_turn"),
    "numeric_text": ('{"turns": [{"speaker": "a", "text": 3}]}', "bad_turn"),
    "bad_id": ('{"dialogue_id": 5, "turns": [{"speaker": "a", "text": "hi"}]}', "bad_dialogue_id"),
    "bad_services": ('{"services": ["Taxi_1", ""], "turns": [{"speaker": "a", "text": "hi"}]}', "bad_services"),
    "partial_candidates": ('{"turns": [{"speaker": "a", "text": "hi"}], "response_index": 0}', "bad_candidates"),
    "candidate_mismatch": ('{"turns": [{"speaker": "a", "text": "hi"}], "response_index": 0, '
                           '"candidates": ["ho"], "candidate_labels": [1]}', "bad_candidates"),
    "label_count": ('{"turns": [{"speaker": "a", "text": "hi"}], "response_index": 0, '
                    '"candidates": ["hi", "x"], "candidate_labels": [1]}', "label_count"),
}


@pytest.mark.parametrize("case", sorted(BAD_JSONL))
def test_jsonl_malformed(tmp_path, case):
    line, reason = BAD_JSONL[case]
    good = json.dumps({"turns": [{"speaker": "a", "text": "hi"}]})
    path = write_lines(tmp_path / "c.jsonl", [good, line])
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}:2: ") as info:
        list(read_jsonl(path))
    assert info.value.reason == reason
    stats = PrepStats()
    assert len(list(read_jsonl(path, skip_malformed=True, stats=stats))) == 1
    assert stats.malformed == {reason: {"count": 1, "examples": [f"{path}:2"]}}


# ---------------------------------------------------------------- dispatch


def test_read_corpus_dispatch(tmp_path):
    assert set(READERS) == {"authors", "mdc", "ecd", "jddc", "sgd", "jsonl", "self_dialogue"}
    path = write_lines(tmp_path / "train.txt", ["1\ta\tb"])
    stats = PrepStats()
    (dialogue,) = read_corpus(path, "ecd", stats=stats)
    assert len(dialogue.turns) == 2 and stats["dialogues_read"] == 1
    bad = write_lines(tmp_path / "bad.txt", ["oops"])
    assert list(read_corpus(bad, "authors", skip_malformed=True)) == []


def test_read_corpus_unknown_format(tmp_path):
    valid = "authors, ecd, jddc, jsonl, mdc, self_dialogue, sgd"
    with pytest.raises(ValueError, match=f"unknown input format 'csv'; valid formats: {valid}"):
        read_corpus(tmp_path / "x", "csv")
    with pytest.raises(ValueError, match="unknown input format 'csv'"):
        default_min_turns("csv")


def test_min_turns_default_per_format():
    # Paper 5.1.1: fewer than 4 turns are dropped in JDDC and ECD; MDC is kept whole.
    assert all(reader.name == name for name, reader in READERS.items())
    assert [default_min_turns(name) for name in ("authors", "ecd", "jddc", "jsonl")] == [4, 4, 4, 4]
    assert [default_min_turns(name) for name in ("mdc", "sgd", "self_dialogue")] == [0, 0, 0]


def _corpus_flags(argv):
    """The entry points' corpus flags, parsed from `argv`."""
    private = PrivateFlags()
    define_corpus_flags(private)
    private.values(["prog", "--input_file=corpus.txt", *argv])
    return private.values


def test_corpus_flags_help_comes_from_the_registry():
    flag_values = _corpus_flags([])
    for name, reader in READERS.items():
        assert f"{name}: {reader.help}" in flag_values["input_format"].help
        assert f"{name} {reader.min_turns}" in flag_values["min_turns"].help
    assert sorted(flag_values["input_format"].parser.enum_values) == sorted(READERS)


def read_toy(path, skip_malformed=False, stats=None):
    """A toy format: one dialogue per line, its turns separated by " | ", speakers alternating."""
    stats = stats if stats is not None else PrepStats()
    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            texts = line.rstrip("\n").split(" | ")
            stats.increment("dialogues_read")
            yield Dialogue(dialogue_id=f"toy-{line_number}", source=str(path), line_number=line_number,
                           turns=tuple(Turn(speaker=str(i % 2), text=text) for i, text in enumerate(texts)))


def test_a_registered_toy_reader_is_a_format_everywhere(tmp_path, monkeypatch):
    with pytest.raises(flags.IllegalFlagValueError):
        _corpus_flags(["--input_format=toy"])
    monkeypatch.setitem(READERS, "toy", Reader(name="toy", read=read_toy, min_turns=2, help="turns split at ' | '"))

    flag_values = _corpus_flags(["--input_format=toy"])
    assert flag_values.input_format == "toy"
    assert "toy: turns split at ' | '." in flag_values["input_format"].help
    assert "toy 2" in flag_values["min_turns"].help
    assert default_min_turns("toy") == 2
    path = write_lines(tmp_path / "toy.txt", ["hi | hello there", "bye"])
    stats = PrepStats()
    dialogues = list(read_corpus(path, "toy", stats=stats))
    assert [d.dialogue_id for d in dialogues] == ["toy-1", "toy-2"]
    assert [[(t.speaker, t.text) for t in d.turns] for d in dialogues] == [[("0", "hi"), ("1", "hello there")],
                                                                           [("0", "bye")]]
    assert stats["dialogues_read"] == 2
