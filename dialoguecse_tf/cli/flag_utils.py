"""Filling a stage's config dataclass from absl flags of the same names."""

import dataclasses
import typing


def config_from_flags(config_class, flag_values, **overrides):
    """Builds `config_class` taking each field from the flag with the field's name.

    Nested dataclass fields are filled the same way, so one flag name maps to one config
    field everywhere. List-valued flags become tuples to keep configs hashable.
    """
    hints = typing.get_type_hints(config_class)
    values = {}
    for field in dataclasses.fields(config_class):
        if field.name in overrides:
            values[field.name] = overrides[field.name]
        elif dataclasses.is_dataclass(hints[field.name]):
            values[field.name] = config_from_flags(hints[field.name], flag_values)
        elif field.name in flag_values:
            value = flag_values[field.name].value
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return config_class(**values)


def define_corpus_flags(flags):
    """The input flags every data-prep entry point shares (fields of `CorpusConfig`)."""
    flags.DEFINE_multi_string("input_file", None, "Corpus file or glob; repeat the flag for several.")
    flags.DEFINE_enum("input_format", "jsonl", ["authors", "mdc", "ecd", "jsonl"],
                      "authors: DialogueCSE training format; mdc: Microsoft Dialogue Challenge TSV; "
                      "ecd: ECD response-selection release; jsonl: this project's format (README).")
    flags.DEFINE_bool("skip_malformed", False, "Skip malformed lines and count them instead of stopping.")
    flags.DEFINE_bool("merge_speakers", True, "Merge consecutive utterances of the same speaker (paper 5.1.1).")
    flags.DEFINE_integer("min_turns", 4, "Drop dialogues with fewer turns (paper: 4 for JDDC and ECD); 0 keeps all.")
    flags.mark_flag_as_required("input_file")
