"""`RecordType`: everything the rest of the project knows about one kind of records.

Each record type's module (`mlm`, `contrastive`, `pairs`, `dialogues`) exports one `RecordType`
and `registry` lists them. From it the data-prep entry point generates its flags
(`cli.records_flags`), `prep.run_create_records` writes the records, the experiment runner has a
tool for them (`experiments.tools`), the Beam engine finds the type's pipeline
(`beam_pipeline`) and `reader` reads a folder whose `records_info.json` names the type.
Pure Python: a record type's module loads without TensorFlow (`spec`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping


@dataclasses.dataclass(frozen=True)
class RecordType:
    """One record type.

    Attributes:
      name: the `record_type` of its `records_info.json`, and the file name prefix of its shards
        (`{name}-00000-of-00004.tfrecord`).
      spec_class: its `spec.RecordSpec` subclass; its `max_seq_length` is the tokenizer's.
      settings_class: a dataclass of `config_fields.field`s, every setting of its data prep:
        the fields named like `spec_class`'s make the spec, the others are `write`'s keyword
        arguments. Its entry point's flags are generated from it, so a default and its help text
        are written once.
      write: the single-process writer, `write(dialogues, tokenizer, output_dir, spec, stats=...,
        **arguments)`, returning the `PrepStats` it counted into; it writes the shards and
        `records_info.json` (with `records_info`).
      entry_point: its data-prep script, relative to the repository.
      tool: the experiment runner's tool that runs `entry_point`.
      tool_version: part of every key of a run of `tool`: bumped when the writer writes other
        bytes for the same settings, so runs the former code made are not reused (2: the
        streaming writers drew other samples, masks and negatives from the same seeds).
      info_arguments: (key, writer argument) pairs: the writer arguments its `records_info.json`
        records beside the counts, under those keys (a reader needs them to interpret the records).
      beam_builder: "module:function" of its Apache Beam pipeline (`beam_pipeline` documents the
        interface), imported only when `--engine=beam` runs; None: single-process only.
      beam_shard_order: how the Beam engine orders a shard: None (as its parts come), "sorted"
        (by the records' order keys) or "rounds" (round by round).
    """

    name: str
    spec_class: type
    settings_class: type
    write: Callable
    entry_point: str
    tool: str
    tool_version: int = 1
    info_arguments: tuple = ()
    beam_builder: str | None = None
    beam_shard_order: str | None = None

    def shard_prefix(self, output_dir: str) -> str:
        """The path prefix of its shards in `output_dir`."""
        return os.path.join(output_dir, self.name)

    @property
    def file_pattern(self) -> str:
        """The glob of its shards in a folder (e.g. for a training stage's `--train_file`)."""
        return f"{self.name}-*.tfrecord"

    def split_settings(self, settings) -> tuple[Any, dict]:
        """The spec and the writer's arguments that settings describe.

        Args:
          settings: an instance of `settings_class`.

        Returns:
          (spec, arguments): a `spec_class` of the settings named like its fields, and {name:
          value} of the others.
        """
        if not isinstance(settings, self.settings_class):
            raise TypeError(f"{self.name} records take {self.settings_class.__name__}, got {type(settings).__name__}")
        values = {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings)}
        spec_fields = {field.name for field in dataclasses.fields(self.spec_class)}
        spec = self.spec_class(**{name: value for name, value in values.items() if name in spec_fields})
        return spec, {name: value for name, value in values.items() if name not in spec_fields}

    def records_info(self, stats, arguments: Mapping[str, Any]) -> dict:
        """The `stats` of its `records_info.json`.

        Args:
          stats: the `PrepStats` of the writing.
          arguments: the writer's arguments by name (at least those of `info_arguments`).

        Returns:
          The counts, and the writer arguments of `info_arguments` under their keys.
        """
        return {**stats.to_dict(), **{key: arguments[argument] for key, argument in self.info_arguments}}
