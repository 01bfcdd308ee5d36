"""Typed config fields that carry their help text, so each default and help is written once.

Config dataclasses declare `field(default, "help", choices=...)`; the entry points generate
their absl flags from them (`cli.flag_utils.define_config_flags`), and `config.json` is the
dataclass itself. The module imports nothing heavy, so command lines are checked at once.
"""

from __future__ import annotations

import dataclasses
import typing

# The sentence poolings (`pooling.POOLING_MODES`, repeated free of TensorFlow so that command
# lines are checked at once; a test keeps them equal) and the help of every flag choosing one.
POOLING_MODES = ("mean", "cls", "pooler")
POOLING_HELP = ("mean (masked token mean, the papers'), cls (the [CLS] vector) or pooler (BERT's pooler output); "
                "unset: the pooling the checkpoint records (its training objective's), else mean.")


def field(default=None, help: str = "", choices: tuple | None = None, flag: str | None = None,  # noqa: A002
          **kwargs):
    """A dataclass field with its help text; `flag="list"` makes a tuple field one
    comma-separated flag instead of a repeatable one."""
    metadata = {"help": help, "choices": tuple(choices) if choices else None, "flag": flag}
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple default: configs are frozen and hashable")
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


def field_kind(config_class, name: str) -> tuple[type, bool]:
    """(base type, is a tuple of that type) of field `name`, with Optional unwrapped."""
    hint = typing.get_type_hints(config_class)[name]
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    origin = typing.get_origin(hint)
    if origin is tuple:
        return (args[0] if args else str), True
    if args and origin is not None:  # Optional[X] / X | None
        inner = args[0]
        if typing.get_origin(inner) is tuple:
            return (typing.get_args(inner)[0] or str), True
        return inner, False
    return hint, False

