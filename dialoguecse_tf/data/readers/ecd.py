"""[ecd] the full E-commerce Dialogue Corpus release in response-selection format.

`label \\t utt_1 \\t ... \\t utt_k \\t response` with label 0 or 1 and at least one context
utterance. Only label-1 lines become dialogues (turns utt_1..utt_k, response); label-0 lines
(sampled negative responses) are skipped and counted as "skipped_non_positive". Speakers
alternate "0"/"1" and the response is "1"; as they are implied by position, an empty utterance
is malformed. Space-segmented Chinese text is kept as is.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers.fields import check_utterance
from dialoguecse_tf.data.readers.lines import LineError, PathLike, read_lines
from dialoguecse_tf.data.readers.reader import Reader


def read_ecd_release(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads the full ECD release (response-selection format; see the module docstring).

    Args:
      path: a release file (`train.txt`, ...).
      skip_malformed: skip (and count) a malformed line instead of raising `DataFormatError`.
      stats: counts dialogues read, label-0 lines, blank and malformed lines (a new `PrepStats`
        when None).

    Returns:
      An iterator of one dialogue per label-1 line; ids "<file stem>-<line number>".
    """
    source = str(path)
    stem = pathlib.Path(path).stem
    counted = stats if stats is not None else PrepStats()

    def parse(line: str, line_number: int) -> Dialogue | None:
        fields = line.split("\t")
        if len(fields) < 3:
            raise LineError("field_count", f"expected a label, context utterances and a response, "
                                           f"got {len(fields)} field(s)")
        label = fields[0].strip()
        if label not in ("0", "1"):
            raise LineError("bad_label", f"label must be 0 or 1, got {fields[0][:40]!r}")
        if label == "0":
            counted.increment("skipped_non_positive")
            return None
        texts = [check_utterance(text, f"utterance {i + 1}") for i, text in enumerate(fields[1:])]
        n = len(texts)
        return Dialogue(
            dialogue_id=f"{stem}-{line_number}",
            turns=tuple(Turn(speaker="1" if (n - 1 - i) % 2 == 0 else "0", text=text) for i, text in enumerate(texts)),
            source=source,
            line_number=line_number,
        )

    return read_lines(path, counted, skip_malformed, parse)


# The paper (section 5.1.1) drops ECD dialogues with fewer than 4 turns ("usually incomplete in
# practice").
READER = Reader(name="ecd", read=read_ecd_release, min_turns=4, help="ECD response-selection release")
