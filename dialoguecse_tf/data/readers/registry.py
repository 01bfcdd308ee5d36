"""The corpus formats by name: the one list of them, and reading a corpus by its format's name.

Adding a format is a module of this package exporting its `reader.Reader` and one line below;
CONTRIBUTING.md walks through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from absl import logging

from dialoguecse_tf.data.dialogue import Dialogue
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import authors, ecd, jddc, jsonl, mdc, self_dialogue, sgd
from dialoguecse_tf.data.readers.lines import PathLike
from dialoguecse_tf.data.readers.reader import Reader

READERS: dict[str, Reader] = {reader.name: reader for reader in (
    authors.READER,
    mdc.READER,
    ecd.READER,
    jddc.READER,
    sgd.READER,
    jsonl.READER,
    self_dialogue.READER,
)}


def get_reader(input_format: str) -> Reader:
    """The registered reader of a format.

    Args:
      input_format: a format's name (`--input_format`).

    Returns:
      Its `Reader`; ValueError naming the registered formats when there is none.
    """
    if input_format not in READERS:
        raise ValueError(f"unknown input format {input_format!r}; valid formats: {', '.join(sorted(READERS))}")
    return READERS[input_format]


def default_min_turns(input_format: str) -> int:
    """The min-turns filter's default for a format.

    Args:
      input_format: a format's name (`--input_format`).

    Returns:
      The least number of turns a dialogue of that format needs by default (0 keeps all).
    """
    return get_reader(input_format).min_turns


def read_corpus(
    path: PathLike, input_format: str, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads `path` with the reader registered under `input_format` in `READERS`.

    A dialogue whose id repeats an earlier one's is kept, and counted as "repeated_dialogue_ids"
    (the first repeat warned about, naming both places), as `dialoguecse-embed` does: corpora
    are read as published, and ids are labels, not keys.

    Args:
      path: what the format's reader takes (a file; sgd: also a folder or a glob).
      input_format: a name in `READERS`; ValueError otherwise, raised at the call.
      skip_malformed: skip (and count) malformed records instead of raising `DataFormatError`.
      stats: where the reader counts (a new `PrepStats` when None).

    Returns:
      An iterator of the corpus's dialogues, in file order.
    """
    reader = get_reader(input_format)
    stats = stats if stats is not None else PrepStats()
    return _counting_repeated_ids(reader.read(path, skip_malformed=skip_malformed, stats=stats), stats)


def _counting_repeated_ids(dialogues: Iterable[Dialogue], stats: PrepStats) -> Iterator[Dialogue]:
    first: dict = {}
    for dialogue in dialogues:
        where = f"{dialogue.source}:{dialogue.line_number}" if dialogue.line_number else str(dialogue.source)
        if dialogue.dialogue_id in first:
            if not stats["repeated_dialogue_ids"]:
                logging.warning("%s: dialogue id %r repeats the dialogue at %s; both are kept (repeated ids are "
                                "counted in the stats as repeated_dialogue_ids)", where, dialogue.dialogue_id,
                                first[dialogue.dialogue_id])
            stats.increment("repeated_dialogue_ids")
        else:
            first[dialogue.dialogue_id] = where
        yield dialogue
