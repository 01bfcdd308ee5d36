"""The record types by name: the one list of them.

Adding a record type is a module of this package exporting its `record_type.RecordType` (spec,
settings, writer, entry point) and one line below; CONTRIBUTING.md walks through it. Pure
Python, like the modules it lists: the data-prep entry points read it before TensorFlow loads.
"""

from __future__ import annotations

from dialoguecse_tf.records import contrastive, dialogues, mlm, pairs
from dialoguecse_tf.records.record_type import RecordType

RECORD_TYPES: dict[str, RecordType] = {record_type.name: record_type for record_type in (
    mlm.MLM,
    contrastive.CONTRASTIVE,
    pairs.PAIRS,
    dialogues.DIALOGUES,
)}


def get_record_type(name: str) -> RecordType:
    """The registered record type `name`; ValueError naming the registered ones otherwise."""
    if name not in RECORD_TYPES:
        raise ValueError(f"unknown record type {name!r}; expected one of {sorted(RECORD_TYPES)}")
    return RECORD_TYPES[name]


def record_type_of(settings) -> RecordType:
    """The registered record type whose settings class `settings` is an instance of."""
    for record_type in RECORD_TYPES.values():
        if type(settings) is record_type.settings_class:
            return record_type
    raise ValueError(f"{type(settings).__name__} is the settings of no registered record type "
                     f"({', '.join(sorted(RECORD_TYPES))})")
