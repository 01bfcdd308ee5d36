"""Readers that turn each supported corpus format into `Dialogue` objects: one module per format.

Every reader is a generator taking `path`, `skip_malformed` and `stats` (a `PrepStats`).
Line formats (all but sgd) are read as bytes and decoded as UTF-8 line by line (a UTF-8
byte-order mark at the start of the file is ignored), so an encoding error names its line.
Lines end at "\\n", "\\r\\n" or a lone "\\r" (old Mac files), as `dialoguecse-embed` reads its
input; each counts as a line for line numbers. Blank (whitespace-only) lines
are skipped and counted as "blank_lines". A malformed line raises `DataFormatError`
("file:line: message", 1-based line numbers); with `skip_malformed=True` it is skipped instead
and counted in `stats.malformed` under its reason. Each yielded dialogue counts one
"dialogues_read". Utterance texts are kept exactly as written. An utterance that is empty or
whitespace-only is skipped and counted as "empty_turns_skipped" where the format names each
turn's speaker (mdc, jddc, sgd, jsonl: dropping the turn changes no other turn); a dialogue
left with no turn is malformed. Where speakers or candidates are implied by position (authors,
ecd) an empty utterance is malformed, as dropping it would reassign the turns around it.
Dialogue ids are "<file stem>-<line number>" unless the format's module says otherwise.
Intents from dialogue acts follow `dialogue.turn_intent`: a turn's first act.

Modules: one per format, each documenting it and exporting its `reader.Reader` (name, read
function, min-turns default, help): `authors`, `mdc`, `ecd`, `jddc`, `sgd`, `jsonl`,
`self_dialogue`;
`registry` lists them (`READERS`) and reads a corpus by its format's name (`read_corpus`);
`lines` and `fields` hold what the formats share.
"""

from dialoguecse_tf.data.readers.authors import read_authors_contrastive
from dialoguecse_tf.data.readers.ecd import read_ecd_release
from dialoguecse_tf.data.readers.jddc import read_jddc_chat
from dialoguecse_tf.data.readers.jsonl import read_jsonl, write_jsonl
from dialoguecse_tf.data.readers.lines import json_list_items
from dialoguecse_tf.data.readers.mdc import read_mdc_tsv
from dialoguecse_tf.data.readers.reader import Reader
from dialoguecse_tf.data.readers.registry import READERS, default_min_turns, get_reader, read_corpus
from dialoguecse_tf.data.readers.self_dialogue import read_self_dialogue
from dialoguecse_tf.data.readers.sgd import read_sgd

__all__ = [
    "READERS",
    "Reader",
    "default_min_turns",
    "get_reader",
    "json_list_items",
    "read_authors_contrastive",
    "read_corpus",
    "read_ecd_release",
    "read_jddc_chat",
    "read_jsonl",
    "read_mdc_tsv",
    "read_self_dialogue",
    "read_sgd",
    "write_jsonl",
]
