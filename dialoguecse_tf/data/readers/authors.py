"""[authors] the DialogueCSE authors' contrastive training format (`train_data.txt`).

6 tab-separated fields per line: left context utterances joined by "|" (may be empty); right
context joined by "|" (may be empty); speaker roles 0/1 joined by "|"; an integer label; the
candidate responses joined by "|" (candidate 0 is the true response); one 0/1 label per
candidate joined by "|" (exactly the first is 1). The roles list has one entry per context
utterance except that the last left role, the response role and the first right role share one
entry written "a-b-c", so a line with L left and R right utterances has L + R - 1 entries, e.g.
L=2, R=1: "0|1-0-1". All lines of the authors' released sample have both contexts non-empty;
for an empty context the shared entry loses that side: "b-c" first (no left context), "a-b"
last (no right context), a lone "b" (neither). Turns are left + [candidate 0] + right with
speakers "0"/"1" from the roles; `response_index` = L. Speakers are implied by position, so an
empty utterance is malformed.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers.fields import check_candidate_labels, check_utterance
from dialoguecse_tf.data.readers.lines import LineError, PathLike, read_lines
from dialoguecse_tf.data.readers.reader import Reader


def _split_utterances(field: str, what: str) -> list[str]:
    if field == "":
        return []
    return [check_utterance(text, f"utterance {i + 1} in {what}") for i, text in enumerate(field.split("|"))]


def _authors_roles(field: str, n_left: int, n_right: int) -> list[str]:
    entries = field.split("|")
    expected_entries = max(n_left, 1) + max(n_right, 1) - 1
    boundary = max(n_left - 1, 0)
    if len(entries) != expected_entries:
        raise LineError("role_count", f"{len(entries)} role entries for {n_left} left and {n_right} right "
                                      f"utterances (expected {expected_entries})")
    shared = entries[boundary].split("-")
    expected_shared = 1 + (n_left > 0) + (n_right > 0)
    if len(shared) != expected_shared:
        raise LineError("bad_roles", f"role entry {boundary + 1} is {entries[boundary]!r}; expected "
                                     f"{expected_shared} '-'-joined roles around the response")
    roles = entries[:boundary] + shared + entries[boundary + 1:]
    if any(role not in ("0", "1") for role in roles):
        raise LineError("bad_roles", f"roles must be 0 or 1, got {field[:80]!r}")
    return roles


def read_authors_contrastive(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads the authors' contrastive training format (see the module docstring).

    Args:
      path: a `train_data.txt` file.
      skip_malformed: skip (and count) a malformed line instead of raising `DataFormatError`.
      stats: counts dialogues read, blank and malformed lines (a new `PrepStats` when None).

    Returns:
      An iterator of one dialogue per line, with its candidates and their labels; ids
      "<file stem>-<line number>".
    """
    source = str(path)
    stem = pathlib.Path(path).stem

    def parse(line: str, line_number: int) -> Dialogue:
        fields = line.split("\t")
        if len(fields) != 6:
            raise LineError("field_count", f"expected 6 tab-separated fields, got {len(fields)}")
        left_field, right_field, roles_field, label_field, candidates_field, labels_field = fields
        left = _split_utterances(left_field, "left context")
        right = _split_utterances(right_field, "right context")
        roles = _authors_roles(roles_field, len(left), len(right))
        try:
            int(label_field)
        except ValueError:
            raise LineError("bad_label", f"label field is not an integer: {label_field[:40]!r}") from None
        candidates = tuple(check_utterance(text, f"candidate {i + 1}")
                           for i, text in enumerate(candidates_field.split("|")))
        try:
            labels = tuple(int(label) for label in labels_field.split("|"))
        except ValueError:
            raise LineError("bad_label", f"candidate labels are not integers: {labels_field[:80]!r}") from None
        labels = check_candidate_labels(labels, len(candidates))
        texts = left + [candidates[0]] + right
        return Dialogue(
            dialogue_id=f"{stem}-{line_number}",
            turns=tuple(Turn(speaker=role, text=text) for role, text in zip(roles, texts)),
            response_index=len(left),
            candidates=candidates,
            candidate_labels=labels,
            source=source,
            line_number=line_number,
        )

    return read_lines(path, stats, skip_malformed, parse)


# The format holds the authors' ECD (and JDDC) training samples, so it keeps the paper's filter
# for those corpora (section 5.1.1: fewer than 4 turns dropped).
READER = Reader(name="authors", read=read_authors_contrastive, min_turns=4,
                help="DialogueCSE training format")
