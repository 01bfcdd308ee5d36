"""The demo corpus's wording: its templates and slot values, and filling a template.

The templates and slot values are data: the JSON files of `template_files/`, shipped with the
package and read at import (`intents.json`: every main intent with its group, the detail the
agent needs and its request and agent templates; `dialogue_turns.json`: the agent's questions,
the user's replies, dialogue acts, openers and closers; `slot_values.json`: the value pools).
A template names placeholders (`{order_number}`, `{garment}`, ...); `PLACEHOLDERS` gives each its
slot type and its values.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import random
import string
from collections.abc import Callable

_TEMPLATES = importlib.resources.files("dialoguecse_tf.data.demo") / "template_files"


def _as_tuples(value):
    # Tuples, as the pools and templates were when written as code: `PLACEHOLDERS` tells a
    # fixed pool from a sampler by it, and `IntentSpec` stays hashable.
    if isinstance(value, list):
        return tuple(_as_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _as_tuples(item) for key, item in value.items()}
    return value


def _read_template_file(name: str):
    """`template_files/<name>` parsed, its lists as tuples."""
    return _as_tuples(json.loads((_TEMPLATES / name).read_text(encoding="utf-8")))


def _check_texts(name: str, where: str, value) -> None:
    if not isinstance(value, tuple) or not value or not all(isinstance(text, str) and text for text in value):
        raise ValueError(f"{_TEMPLATES / name}: {where} must be a non-empty list of non-empty strings, got {value!r}")


def _read_table(name: str, keys: tuple[str, ...]) -> dict:
    """`template_files/<name>`: a JSON object with exactly `keys`, in that order (which orders
    the intents derived from it)."""
    table = _read_template_file(name)
    if not isinstance(table, dict) or list(table) != list(keys):
        found = list(table) if isinstance(table, dict) else type(table).__name__
        raise ValueError(f"{_TEMPLATES / name}: expected an object with the keys {list(keys)}, got {found}")
    return table


def _read_slot_values(name: str) -> dict[str, tuple[str, ...]]:
    pools = _read_table(name, ("gadget", "garment", "other_product", "city", "country", "date", "size", "colour",
                               "payment_method", "courier", "coupon_code", "first_name", "last_name", "email_domain"))
    for pool, values in pools.items():
        _check_texts(name, pool, values)
    return pools


_SLOT_VALUES = _read_slot_values("slot_values.json")


def _order_number(rng: random.Random) -> str:
    return str(rng.randint(10000, 99999))


def _email(rng: random.Random) -> str:
    first, last = rng.choice(_SLOT_VALUES["first_name"]), rng.choice(_SLOT_VALUES["last_name"])
    return f"{first}.{last}@{rng.choice(_SLOT_VALUES['email_domain'])}"


def _amount(rng: random.Random) -> str:
    return f"£{rng.randint(4, 250)}.{rng.choice(('00', '49', '95', '99'))}"


def _fee(rng: random.Random) -> str:
    return f"£{rng.randint(1, 14)}.{rng.choice(('49', '95', '99'))}"


def _points(rng: random.Random) -> str:
    return str(rng.randrange(50, 3000, 10))


# A template names a placeholder; the placeholder fixes the value pool and the slot type its
# value counts as (a {garment} is a product for the D-STS rule).
# placeholder -> (slot type, fixed value pool or a sampler of fresh values)
PLACEHOLDERS: dict[str, tuple[str, tuple[str, ...] | Callable[[random.Random], str]]] = {
    "order_number": ("order_number", _order_number),
    "product": ("product", _SLOT_VALUES["gadget"] + _SLOT_VALUES["garment"] + _SLOT_VALUES["other_product"]),
    "gadget": ("product", _SLOT_VALUES["gadget"]),
    "garment": ("product", _SLOT_VALUES["garment"]),
    "city": ("city", _SLOT_VALUES["city"]),
    "country": ("country", _SLOT_VALUES["country"]),
    "date": ("date", _SLOT_VALUES["date"]),
    "size": ("size", _SLOT_VALUES["size"]),
    "colour": ("colour", _SLOT_VALUES["colour"]),
    "payment_method": ("payment_method", _SLOT_VALUES["payment_method"]),
    "amount": ("amount", _amount),
    "fee": ("fee", _fee),
    "courier": ("courier", _SLOT_VALUES["courier"]),
    "email": ("email", _email),
    "coupon_code": ("coupon_code", _SLOT_VALUES["coupon_code"]),
    "points": ("points", _points),
}
_POOL_SETS = {name: frozenset(source) for name, (_, source) in PLACEHOLDERS.items() if isinstance(source, tuple)}

# ---------------------------------------------------------------------------------------------
# Intents.


@dataclasses.dataclass(frozen=True)
class IntentSpec:
    """One main intent: its group, the detail the agent needs and its templates.

    `ask` is the placeholder whose slot type the agent asks for when the request lacks it
    (None: the agent can answer without it). `user` holds the training request templates,
    `held_out` those used only for the evaluation sets. `acknowledge` and `answer` are agent
    templates; an agent turn is an acknowledgement followed by a question or an answer.
    """

    name: str
    group: str
    ask: str | None
    user: tuple[str, ...]
    held_out: tuple[str, ...]
    acknowledge: tuple[str, ...]
    answer: tuple[str, ...]


def _read_intents(name: str) -> tuple[IntentSpec, ...]:
    """`template_files/<name>`: a JSON list of objects with exactly `IntentSpec`'s fields."""
    path = _TEMPLATES / name
    entries = _read_template_file(name)
    fields = [field.name for field in dataclasses.fields(IntentSpec)]
    if not isinstance(entries, tuple) or not entries:
        raise ValueError(f"{path}: expected a non-empty list of intents")
    specs = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or sorted(entry) != sorted(fields):
            found = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise ValueError(f"{path}: intent {index} must have the fields {fields}, got {found}")
        where = f"intent {index} ({entry['name']!r})"
        if not all(isinstance(entry[key], str) and entry[key] for key in ("name", "group")):
            raise ValueError(f"{path}: {where}: name and group must be non-empty strings")
        if entry["ask"] is not None and entry["ask"] not in PLACEHOLDERS:
            raise ValueError(f"{path}: {where}: ask {entry['ask']!r} is no placeholder")
        for key in ("user", "held_out", "acknowledge", "answer"):
            _check_texts(name, f"{where}.{key}", entry[key])
        specs.append(IntentSpec(**entry))
    return tuple(specs)


_INTENT_SPECS = _read_intents("intents.json")
INTENT_SPECS: dict[str, IntentSpec] = {spec.name: spec for spec in _INTENT_SPECS}
MAIN_INTENTS: tuple[str, ...] = tuple(INTENT_SPECS)
INTENT_GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(spec.name for spec in _INTENT_SPECS if spec.group == group)
    for group in dict.fromkeys(spec.group for spec in _INTENT_SPECS)
}

# The agent's questions for a missing detail and the user's replies, by slot type; the agent's
# first words after the user supplied the detail ("" answers straight away); the turns of the
# dialogue acts, by act and speaker; words a request may start with (a greeting when there is
# no greeting pair, a transition for the second intent; the request's first letter is
# lower-cased after them); sign-offs a request sometimes ends with.
_TURNS = _read_table("dialogue_turns.json", ("ask", "inform", "after_inform", "dialogue_acts", "greeting_openers",
                                             "switch_openers", "closers"))
ASK: dict[str, tuple[str, ...]] = _TURNS["ask"]
INFORM: dict[str, tuple[str, ...]] = _TURNS["inform"]
AFTER_INFORM: tuple[str, ...] = _TURNS["after_inform"]
DIALOGUE_ACTS: dict[str, dict[str, tuple[str, ...]]] = _TURNS["dialogue_acts"]
GREETING_OPENERS: tuple[str, ...] = _TURNS["greeting_openers"]
SWITCH_OPENERS: tuple[str, ...] = _TURNS["switch_openers"]
CLOSERS: tuple[str, ...] = _TURNS["closers"]

INFORM_INTENTS: tuple[str, ...] = tuple(f"inform_{slot_type}" for slot_type in INFORM)
DIALOGUE_ACT_INTENTS: tuple[str, ...] = tuple(DIALOGUE_ACTS)
INTENTS: tuple[str, ...] = MAIN_INTENTS + INFORM_INTENTS + DIALOGUE_ACT_INTENTS


_FIELDS: dict[str, tuple[str, ...]] = {}


def template_fields(template: str) -> tuple[str, ...]:
    """The placeholders of a template (parsed once per template).

    Args:
      template: a `str.format` template.

    Returns:
      Its placeholder names, in order.
    """
    fields = _FIELDS.get(template)
    if fields is None:
        fields = tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)
        _FIELDS[template] = fields
    return fields


def sample_value(placeholder: str, rng: random.Random) -> str:
    """A fresh value for a placeholder.

    Args:
      placeholder: a name in `PLACEHOLDERS`.
      rng: the dialogue stream's generator.

    Returns:
      A value from the placeholder's pool, or made by its sampler.
    """
    source = PLACEHOLDERS[placeholder][1]
    return rng.choice(source) if isinstance(source, tuple) else source(rng)


def _fits(placeholder: str, value: str) -> bool:
    pool = _POOL_SETS.get(placeholder)
    return pool is None or value in pool


def render(template: str, rng: random.Random, state: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Fills `template`, reusing the dialogue's value of a slot type where it fits.

    Args:
      template: a template of placeholders in `PLACEHOLDERS`.
      rng: the dialogue stream's generator, drawn from for values the dialogue has not yet.
      state: the dialogue's values, slot type -> value; new values are stored in it, so later
        turns refer to the same order, product or email.

    Returns:
      (text, its slots as sorted (slot type, value) pairs).
    """
    filled = {}
    for name in template_fields(template):
        slot_type = PLACEHOLDERS[name][0]
        value = state.get(slot_type)
        if value is None or not _fits(name, value):
            value = sample_value(name, rng)
            state[slot_type] = value
        filled[name] = value
    slots = tuple(sorted({PLACEHOLDERS[name][0]: value for name, value in filled.items()}.items()))
    return template.format(**filled), slots


def render_with(template: str, slots: tuple[tuple[str, str], ...]) -> str | None:
    """A template filled with given slot values.

    Args:
      template: a template of placeholders in `PLACEHOLDERS`.
      slots: (slot type, value) pairs.

    Returns:
      `template` filled with exactly `slots`; None when its slot types differ from theirs or a
      value is not in its placeholder's pool.
    """
    values = dict(slots)
    fields = template_fields(template)
    if sorted(PLACEHOLDERS[name][0] for name in fields) != sorted(values):
        return None
    filled = {name: values[PLACEHOLDERS[name][0]] for name in fields}
    if not all(_fits(name, value) for name, value in filled.items()):
        return None
    return template.format(**filled)
