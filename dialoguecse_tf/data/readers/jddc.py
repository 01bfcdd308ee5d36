"""[jddc] the JD Dialogue Corpus release's raw chat log (`chat.txt`).

One utterance per line, 7 tab-separated columns `session_id, user_id, waiter_send, is_transfer,
is_repeat, sku, content`. The column order is the one the release's own readers use: JD's
baseline for the JD Dialog Challenge (github.com/SimonJYang/JDDC-Baseline-Seq2Seq; its
dataProcessing.py, also copied into github.com/EndlessLethe/jddc2019-3th-retrieve-model under
code/Seq2Seq基线示例/, reads the session id from column 0, waiter_send from column 2, the text
from column 6) and the 4th-place solution's parser (github.com/zengbin93/jddc_solution_4th,
preliminary/data_pre/parser.py, which names all 7: id, user, waiter_send, transfer, repeat, sku,
content). waiter_send is "1" for an agent (customer-service) message and "0" for the customer's:
speaker "agent" or "user"; any other value is malformed. A content with tabs arrives as more
than 7 fields; the extra fields are rejoined with tabs into the text. One dialogue per
session_id, whose rows must be contiguous, turns in file order; the dialogue id is the
session_id and its line number that of the session's first row. A first line whose first field
is "session_id" (a header some copies carry) is skipped and counted as "header_lines". An empty
message is skipped and counted. The release has no intent labels (intent None); user_id,
is_transfer, is_repeat and sku are not used.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers.lines import LineError, PathLike, iter_lines, read_sessions
from dialoguecse_tf.data.readers.reader import Reader

_JDDC_SPEAKERS = {"0": "user", "1": "agent"}


def read_jddc_chat(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads the JDDC release's raw chat log, `chat.txt` (see the module docstring).

    Args:
      path: the chat log.
      skip_malformed: skip (and count) a malformed row instead of raising `DataFormatError`.
      stats: counts dialogues read, empty turns, a header line, blank and malformed lines (a new
        `PrepStats` when None).

    Returns:
      An iterator of one dialogue per session, ids the session ids.
    """
    stats = stats if stats is not None else PrepStats()

    def parse_row(line: str) -> tuple[str, int, Turn | None]:
        fields = line.split("\t")
        if len(fields) < 7:
            raise LineError("field_count", f"expected 7 tab-separated fields, got {len(fields)}")
        session_id = fields[0].strip()
        if not session_id:
            raise LineError("bad_session_id", "empty session_id")
        speaker = _JDDC_SPEAKERS.get(fields[2].strip())
        if speaker is None:
            raise LineError("bad_speaker", f"waiter_send must be 0 or 1, got {fields[2][:40]!r}")
        # Tabs inside the content split it into further fields; they belong to the text.
        text = "\t".join(fields[6:])
        return session_id, 0, Turn(speaker=speaker, text=text) if text.strip() else None

    lines = iter_lines(path, stats, skip_malformed)
    first = next(lines, None)
    if first is None:
        return
    if first[1].split("\t", 1)[0].strip().lower() == "session_id":
        stats.increment("header_lines")
    else:
        lines = itertools.chain([first], lines)
    yield from read_sessions(path, lines, stats, skip_malformed, parse_row, lambda session: session)


# The paper (section 5.1.1) drops JDDC dialogues with fewer than 4 turns ("usually incomplete in
# practice").
READER = Reader(name="jddc", read=read_jddc_chat, min_turns=4, help="JDDC release's chat.txt")
