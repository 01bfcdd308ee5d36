"""The paper's corpus preprocessing (section 5.1.1) and the counters every data stage shares.

The paper (1) combines consecutive utterances of the same speaker and (2) discards dialogues
with fewer than 4 turns (JDDC and ECD; MDC is kept whole). Turn counts here are taken after
merging, since a merged run of utterances is one turn.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn, turn_intent
from dialoguecse_tf.encoder.cjk import NO_SPACE_RANGES, in_ranges
from dialoguecse_tf.io_utils import write_json

# Examples are for a human to open the offending lines; the count carries the scale.
_MAX_MALFORMED_EXAMPLES = 10
# Characters of an utterance kept per wordpiece of max_seq_length before tokenizing (`cap_text`).
# The cut changes a record only when an utterance's first max_seq_length pieces take more than
# 100 characters each. Prose has 1 (Chinese) to about 5 (English) characters per piece; the
# margin covers runs of whitespace, combining marks and words too long for the vocabulary (one
# [UNK] each), and is checked on the real ECD and SGD text in the tests.
CHARS_PER_TOKEN = 100


class PrepStats:
    """Counters for one data preparation run, written next to its output as JSON.

    Plain counters (`increment`) include the standard ones below; any other key is accepted
    so a stage can count something specific to its format. Dropped dialogues are counted by
    reason (`drop`); skipped malformed lines by reason with up to 10 `file:line` examples
    (`malformed_line`).
    """

    STANDARD_COUNTERS = (
        "dialogues_read",
        "dialogues_kept",
        "blank_lines",
        "empty_turns_skipped",
        "turns_merged",
        "samples_written",
        "tokens_truncated",
    )

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(self.STANDARD_COUNTERS, 0)
        self.dropped: dict[str, int] = {}
        self.malformed: dict[str, dict] = {}

    def __getitem__(self, key: str) -> int:
        return self.counts.get(key, 0)

    def increment(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + n

    def malformed_line(self, reason: str, path: str | os.PathLike, line_number: int) -> None:
        entry = self.malformed.setdefault(reason, {"count": 0, "examples": []})
        entry["count"] += 1
        if len(entry["examples"]) < _MAX_MALFORMED_EXAMPLES:
            entry["examples"].append(f"{path}:{line_number}")

    @property
    def malformed_lines(self) -> int:
        return sum(entry["count"] for entry in self.malformed.values())

    def to_dict(self) -> dict:
        return {
            **self.counts,
            "dropped": dict(self.dropped),
            "malformed_lines": self.malformed_lines,
            "malformed": {reason: {"count": e["count"], "examples": list(e["examples"])}
                          for reason, e in self.malformed.items()},
        }

    def merge(self, other: "PrepStats") -> "PrepStats":
        """Adds `other`'s counts into these; malformed-line examples are kept in merge order (merge
        the stats of files in file order to get a single pass's examples). Returns self."""
        for key, value in other.counts.items():
            self.increment(key, value)
        for reason, value in other.dropped.items():
            self.drop(reason, value)
        for reason, entry in other.malformed.items():
            mine = self.malformed.setdefault(reason, {"count": 0, "examples": []})
            mine["count"] += entry["count"]
            mine["examples"] = (mine["examples"] + entry["examples"])[:_MAX_MALFORMED_EXAMPLES]
        return self

    def write_json(self, path: str | os.PathLike) -> None:
        """Writes atomically, so a reader never sees a half-written stats file."""
        write_json(path, self.to_dict())

    def __repr__(self) -> str:
        return f"PrepStats({self.to_dict()!r})"


def _is_cjk(char: str) -> bool:
    return in_ranges(char, NO_SPACE_RANGES)


def join_utterances(first: str, second: str) -> str:
    """Joins two utterances of one speaker into one turn's text.

    Rule: a single space between them, except none when the end of `first` or the start of
    `second` is a CJK character (Chinese and Japanese put no spaces between words, so a space
    would be an artefact) or already whitespace.
    """
    if not first or not second:
        return first + second
    left, right = first[-1], second[0]
    if _is_cjk(left) or _is_cjk(right) or left.isspace() or right.isspace():
        return first + second
    return first + " " + second


def _merge_runs(turns: tuple[Turn, ...]) -> list[Turn]:
    merged: list[Turn] = []
    run: list[Turn] = []
    for turn in turns:
        if run and turn.speaker != run[0].speaker:
            merged.append(_merge_run(run))
            run = []
        run.append(turn)
    if run:
        merged.append(_merge_run(run))
    return merged


def _merge_run(run: list[Turn]) -> Turn:
    if len(run) == 1:
        return run[0]
    text = run[0].text
    for turn in run[1:]:
        text = join_utterances(text, turn.text)
    return Turn(speaker=run[0].speaker, text=text, intent=turn_intent(t.intent for t in run if t.intent is not None))


def merge_consecutive_speaker_turns(dialogue: Dialogue) -> Dialogue:
    """Combines consecutive utterances of the same speaker into one turn (paper step 1).

    Texts are joined by `join_utterances`; a merged run keeps the first intent among its
    utterances (None when none has one), the rule `dialogue.turn_intent` applies to the acts
    of a single utterance, so a merged turn still has one intent.

    When `response_index` is set (authors' contrastive format) the response stays a turn of
    its own: it is the retrieval target and its candidate list is fixed, so gluing a context
    utterance onto it would change what is being retrieved. Only the left context and the
    right context are merged, each within itself, and `response_index` is moved to the
    response's new position.
    """
    if dialogue.response_index is None:
        return dataclasses.replace(dialogue, turns=tuple(_merge_runs(dialogue.turns)))
    index = dialogue.response_index
    left = _merge_runs(dialogue.turns[:index])
    right = _merge_runs(dialogue.turns[index + 1:])
    turns = tuple(left + [dialogue.turns[index]] + right)
    return dataclasses.replace(dialogue, turns=turns, response_index=len(left))


def cap_text(text: str, max_seq_length: int, stats: PrepStats) -> str:
    """`text` cut to its first `CHARS_PER_TOKEN * max_seq_length` characters; a cut counts one
    "utterances_capped".

    For the record builders, none of which keeps more than the first `max_seq_length` wordpieces
    of an utterance (each one's module says which): tokenizing a junk utterance of megabytes in
    full costs minutes and gigabytes for pieces no record holds. The tokenizer splits text into
    words at whitespace, punctuation and CJK characters, and a wordpiece never spans two words,
    so every word that ends within the kept characters gives the same pieces from the cut text
    as from the whole. A record is therefore unchanged whenever the text's first
    `max_seq_length` pieces come from such words: all that any builder keeps, or weighs (how
    many pieces a turn has, for dial2vec's recent_turns truncation), lies in them.
    """
    max_chars = CHARS_PER_TOKEN * max_seq_length
    if len(text) <= max_chars:
        return text
    stats.increment("utterances_capped")
    return text[:max_chars]


def cap_utterances(dialogues: Iterable[Dialogue], max_seq_length: int, stats: PrepStats) -> Iterator[Dialogue]:
    """Every turn text and candidate of `dialogues` cut by `cap_text`."""
    for dialogue in dialogues:
        yield cap_dialogue(dialogue, max_seq_length, stats)


def cap_dialogue(dialogue: Dialogue, max_seq_length: int, stats: PrepStats) -> Dialogue:
    """`dialogue` with every turn text and candidate cut by `cap_text`."""
    turns = tuple(dataclasses.replace(turn, text=cap_text(turn.text, max_seq_length, stats))
                  for turn in dialogue.turns)
    candidates = dialogue.candidates
    if candidates is not None:
        candidates = tuple(cap_text(text, max_seq_length, stats) for text in candidates)
    return dataclasses.replace(dialogue, turns=turns, candidates=candidates)


def filter_min_turns(
    dialogues: Iterable[Dialogue], min_turns: int, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Yields dialogues with at least `min_turns` turns (paper step 2: 4 for JDDC and ECD).

    `min_turns=0` disables the filter. Dropped dialogues are counted under "too_few_turns";
    kept ones are not counted here (`preprocess` counts them once, after every step).
    """
    # Validated here rather than in the generator so a bad value fails at the call.
    if min_turns < 0:
        raise ValueError(f"min_turns must be >= 0, got {min_turns}")
    return _filter_min_turns(dialogues, min_turns, stats)


def _filter_min_turns(dialogues: Iterable[Dialogue], min_turns: int, stats: PrepStats | None) -> Iterator[Dialogue]:
    for dialogue in dialogues:
        if len(dialogue.turns) < min_turns:
            if stats is not None:
                stats.drop("too_few_turns")
            continue
        yield dialogue


def preprocess(
    dialogues: Iterable[Dialogue],
    merge_speakers: bool = True,
    min_turns: int = 4,
    stats: PrepStats | None = None,
) -> Iterator[Dialogue]:
    """Applies the paper's preprocessing: speaker-turn merging, then the min-turns filter.

    Counts `turns_merged` (utterances absorbed into a previous one), drops, and
    `dialogues_kept`.
    """
    stats = stats if stats is not None else PrepStats()
    kept = filter_min_turns(_merged(dialogues, merge_speakers, stats), min_turns, stats)
    return _counted_kept(kept, stats)


def _merged(dialogues: Iterable[Dialogue], merge_speakers: bool, stats: PrepStats) -> Iterator[Dialogue]:
    for dialogue in dialogues:
        if merge_speakers:
            before = len(dialogue.turns)
            dialogue = merge_consecutive_speaker_turns(dialogue)
            stats.increment("turns_merged", before - len(dialogue.turns))
        yield dialogue


def _counted_kept(dialogues: Iterator[Dialogue], stats: PrepStats) -> Iterator[Dialogue]:
    for dialogue in dialogues:
        stats.increment("dialogues_kept")
        yield dialogue
