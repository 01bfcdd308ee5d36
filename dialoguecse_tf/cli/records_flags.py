"""The record entry points' flags, generated from `prep.RecordsConfig` and each record type's
settings dataclass (`RecordType.settings_class`), so a default or help text exists once.

Every `data_prep/create_*_data.py` is `records_main(flags, NAME)` and a docstring; a registered
record type gets its flags, its config and its run from here. Nothing here loads TensorFlow:
bad flags and paths fail at once.
"""

from __future__ import annotations

from absl import flags as absl_flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_config_flags, define_corpus_flags
from dialoguecse_tf.prep import RecordsConfig, run_create_records
from dialoguecse_tf.records.record_type import RecordType
from dialoguecse_tf.records.registry import get_record_type

# Flags defined here belong to the entry point that asks for them (its --helpshort lists them).
absl_flags.disclaim_key_flags()


def define_records_flags(flags, record_type: RecordType) -> None:
    """The corpus flags, `RecordsConfig`'s (output folder, vocabulary, engine) and one flag per
    field of the record type's settings."""
    define_corpus_flags(flags)
    define_config_flags(flags, RecordsConfig, exclude=("corpus", "settings"))
    define_config_flags(flags, record_type.settings_class)


def records_config_from_flags(record_type: RecordType, flag_values) -> RecordsConfig:
    """The `RecordsConfig` of parsed flags (defined by `define_records_flags`)."""
    settings = config_from_flags(record_type.settings_class, flag_values)
    return config_from_flags(RecordsConfig, flag_values, settings=settings)


def records_main(flags, name: str):
    """Defines the flags of record type `name`'s entry point and returns its absl `main`; the
    flags it does not define (Beam's pipeline options) reach `main` as `argv[1:]`."""
    record_type = get_record_type(name)
    define_records_flags(flags, record_type)

    def main(argv):
        run_create_records(records_config_from_flags(record_type, flags.FLAGS), pipeline_args=argv[1:])

    return main
