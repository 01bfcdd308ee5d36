"""Typed config fields that carry their help text, so each default and help is written once.

Config dataclasses declare `field(default, "help", choices=...)`; the entry points generate
their absl flags from them (`cli.flag_utils.define_config_flags`), and `config.json` is the
dataclass itself. The module imports nothing heavy, so command lines are checked at once.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing

# The sentence poolings `encoder.pooling` computes, here free of TensorFlow so that command lines
# are checked at once, and the help of every flag choosing one.
POOLING_MODES = ("mean", "cls", "pooler")
POOLING_HELP = ("mean (masked token mean, the papers'), cls (the [CLS] vector) or pooler (BERT's pooler output); "
                "unset: the pooling the checkpoint records (its training objective's), else mean.")
# The dialogue layout `encoder.packing` packs, here free of TensorFlow so that the dialogue
# records (and their entry point's flags) load without it: two speakers' roles, and how a
# dialogue longer than its sequence is cut.
NUM_ROLES = 2
TRUNCATIONS = ("head", "recent_turns")
# The compute precisions `precision.py` runs a model in (variables float32 in every one), here free
# of TensorFlow so that command lines are checked at once, and the help of every flag choosing one.
PRECISIONS = ("float32", "bfloat16", "float16")
PRECISION_HELP = ("float32; bfloat16: mixed, bfloat16 compute with float32 variables (checkpoints stay float32), "
                  "similarities, softmax and losses in float32, refused on a CPU without bfloat16 arithmetic (x86: "
                  "avx512_bf16 or amx_bf16 in /proc/cpuinfo), untested on GPU; float16: mixed, float16 compute, GPU "
                  "only, untested (docs/usage.md, Precision).")


_NOT_ADDED = object()


def field(default=None, help: str = "", choices: tuple | None = None, flag: str | None = None,  # noqa: A002
          minimum=None, exclusive_minimum: bool = False, maximum=None, added_as=_NOT_ADDED, **kwargs):
    """A dataclass field with its help text; `flag="list"` makes a tuple field one
    comma-separated flag instead of a repeatable one. `minimum` / `maximum` bound a number
    (inclusive, or above `minimum` only with `exclusive_minimum`), checked by `check_values`.

    `added_as`: for a setting added after runs were made, the value that does what those runs
    did; a run with it keeps the key it had before the setting existed (`key_settings`), so
    adding an option does not make every committed result read as stale. Fixed when the field
    is added: a later change of its default changes the keys of the runs that take it."""
    metadata = {"help": help, "choices": tuple(choices) if choices else None, "flag": flag, "minimum": minimum,
                "exclusive_minimum": exclusive_minimum, "maximum": maximum}
    if added_as is not _NOT_ADDED:
        metadata["added_as"] = added_as
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple default: configs are frozen and hashable")
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


def key_settings(config, values: dict | None = None) -> dict:
    """A config's settings as a run key hashes them: every field, but those added later at the
    value that does what runs did before they existed (`field(added_as=...)`). `config` is an
    instance, or a config class with `values` ({field: value}) for some of its fields."""
    if values is None:
        values = {spec.name: getattr(config, spec.name) for spec in dataclasses.fields(config)}
    added = {spec.name: spec.metadata["added_as"] for spec in dataclasses.fields(config) if "added_as" in spec.metadata}
    return {name: value for name, value in values.items() if not (name in added and value == added[name])}


@functools.cache
def type_hints(config_class) -> dict:
    """`typing.get_type_hints(config_class)`, evaluated once per class: a plan of the benchmark
    checks thousands of fields, and evaluating the annotations' strings each time took seconds."""
    return typing.get_type_hints(config_class)


def field_kind(config_class, name: str) -> tuple[type, bool]:
    """(base type, is a tuple of that type) of field `name`, with Optional unwrapped."""
    hint = type_hints(config_class)[name]
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


def _type_problem(value, base: type) -> str | None:
    if base is bool:
        return None if isinstance(value, bool) else "a boolean"
    if base is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "a number"
        return None if math.isfinite(value) else "a finite number"
    if base is str:
        return None if isinstance(value, str) else "a string"
    return None


def _range_problem(value, metadata) -> str | None:
    low, high = metadata.get("minimum"), metadata.get("maximum")
    if low is not None:
        if metadata.get("exclusive_minimum") and not value > low:
            return f"greater than {low}"
        if not metadata.get("exclusive_minimum") and not value >= low:
            return f"at least {low}"
    if high is not None and not value <= high:
        return f"at most {high}"
    return None


def check_values(instance) -> None:
    """Raises ValueError naming the first field of a config dataclass whose value has the wrong
    type, is not among its choices or is out of its bounds; `None` passes where the field
    allows it. Run before any work, so a bad setting fails at once and not hours later."""
    name_of = type(instance).__name__
    for spec in dataclasses.fields(instance):
        value = getattr(instance, spec.name)
        if value is None:
            if type(None) in typing.get_args(type_hints(type(instance))[spec.name]):
                continue
            raise ValueError(f"{name_of}.{spec.name} must be set, got None")
        base, is_tuple = field_kind(type(instance), spec.name)
        if is_tuple and not isinstance(value, tuple):
            raise ValueError(f"{name_of}.{spec.name} must be a tuple, got {value!r}")
        for item in value if is_tuple else (value,):
            problem = _type_problem(item, base)
            if problem is None and spec.metadata.get("choices") and item not in spec.metadata["choices"]:
                problem = f"one of {spec.metadata['choices']}"
            if problem is None and base in (int, float):
                problem = _range_problem(item, spec.metadata)
            if problem is not None:
                raise ValueError(f"{name_of}.{spec.name} must be {problem}, got {item!r}")
