"""The project's own demo corpus: English customer-service dialogues of an online shop.

Everything here is written by this project (templates, slot values, rules); nothing is copied
from another corpus. It exists so every stage (pre-training, contrastive training, SR and D-STS
evaluation) can run end to end on data that may be shipped and regenerated at will. The
templates and slot values are data: the JSON files of `demo_templates/`, read at import.

Dialogues. `generate_dialogues(num_dialogues, seed)` draws from `random.Random(seed)` only, so
a seed always gives the same corpus. Speakers strictly alternate "user" / "agent", starting with
the user, so the paper's speaker merging (section 5.1.1) changes nothing, and every dialogue has
4 to 12 turns. A dialogue is: an optional greeting pair; one episode of a main intent; in about
30% of dialogues a second episode after an intent switch ("Also, ..."), usually to an
intent of the same group (a refund after a return, an invoice after a failed payment); then
optionally a thanks pair and a goodbye pair. An episode is the user's request, and when the
request lacks the detail the agent needs (the order number for `order_status`, the email
address for `password_reset`, ...) the agent asks for it and the user supplies it, then the
agent resolves the request. Slot values (order numbers, products, cities, ...) stay consistent
within a dialogue.

Intent labels, on every utterance:
* the 25 main intents of `INTENT_GROUPS` on user requests and on every agent turn of that
  episode (acknowledgement, question for a detail, resolution), since the agent's turn is about
  the conversation's current intent;
* `greeting`, `thanks` and `goodbye` on the opening and closing pairs, both speakers;
* `inform_<slot type>` (`inform_order_number`, `inform_email`, ...) on a user turn that only
  supplies a requested value ("It's 48213."). Such a turn is not labelled with the main intent:
  its text carries nothing of that intent, so the SR set would otherwise call "It's 48213." a
  paraphrase of "Where is my parcel?".

Evaluation sets (paper section 5.1.2, in the released files' formats). They are built from
separate dialogues (`num_eval_dialogues`, drawn from a stream seeded with
`f"demo-eval-{seed}"`) whose user requests come only from held-out templates: every main
intent has at least 8 training request templates and 6 more that never occur in the training
corpus. Evaluation sentences are therefore unseen wordings, not training text; any exact
coincidence with a training utterance is still removed and counted ("eval_overlap_removed").
As the evaluation stream depends on the seed only, runs with different `num_dialogues` share
the same evaluation sets (barring such removals), which keeps training-size comparisons on one
benchmark.
Only user requests of main intents are evaluation sentences: greetings, thanks, goodbyes and
slot-only informs are generic and would be the same text in training.
* SR (`sr/select.txt`): the distinct evaluation sentences with their intents go through
  `build_sr_set` (BM25 top `num_sr_candidates`, at most `max_sr_positives` positives).
* D-STS (`sts/sts.txt`, `score \\t sentence_a \\t sentence_b`): the score is given by rule
  from intents and slot values, not by annotators (`dsts_score`):
    5  same intent and identical slot values (same slot types filled with the same values; two
       sentences without slots count as identical), i.e. paraphrases;
    4  same intent, different slot values (a slot type only one of them has, or a shared slot
       type with different values);
    3  different intents of the same intent group (`INTENT_GROUPS`: delivery, returns,
       order_problems, payment, account, product_info, shipping_options, rewards);
    2  intents of different groups, but the sentences share at least one slot type (both name
       an order number, a product, a city, ...);
    1  different groups and no shared slot type.
  Pairs are sampled stratified (`num_sts_pairs // 5` per score, the remainder to the lowest
  scores), each candidate pair scored by `dsts_score` and kept only for the score being filled.
  The second sentence of a score-5 pair is rendered from another held-out template of the same
  intent with the first sentence's slot values, since two natural sentences rarely share all
  slot values. `sts/sts_metadata.jsonl` holds each pair's intents, groups and slots, line for
  line. `DSTS_RULE` states the rule as a paragraph for reports.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import math
import os
import random
import string
import time
from collections.abc import Callable, Iterable, Sequence

from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.intent import OOS_LABEL
from dialoguecse_tf.data.readers import write_jsonl
from dialoguecse_tf.data.sr_builder import build_sr_set, write_select_file
from dialoguecse_tf.io_utils import atomic_open, write_json

USER = "user"
AGENT = "agent"
MIN_TURNS = 4
MAX_TURNS = 12
NUM_STS_SCORES = 5

# ---------------------------------------------------------------------------------------------
# Templates and slot values: data files of `demo_templates/`, shipped with the package.

_TEMPLATES = importlib.resources.files("dialoguecse_tf.data") / "demo_templates"


def _as_tuples(value):
    # Tuples, as the pools and templates were when written as code: `_PLACEHOLDERS` tells a
    # fixed pool from a sampler by it, and `IntentSpec` stays hashable.
    if isinstance(value, list):
        return tuple(_as_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _as_tuples(item) for key, item in value.items()}
    return value


def _read_template_file(name: str):
    """`demo_templates/<name>` parsed, its lists as tuples."""
    return _as_tuples(json.loads((_TEMPLATES / name).read_text(encoding="utf-8")))


def _check_texts(name: str, where: str, value) -> None:
    if not isinstance(value, tuple) or not value or not all(isinstance(text, str) and text for text in value):
        raise ValueError(f"{_TEMPLATES / name}: {where} must be a non-empty list of non-empty strings, got {value!r}")


def _read_table(name: str, keys: tuple[str, ...]) -> dict:
    """`demo_templates/<name>`: a JSON object with exactly `keys`, in that order (which orders
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
_PLACEHOLDERS: dict[str, tuple[str, tuple[str, ...] | Callable[[random.Random], str]]] = {
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
_POOL_SETS = {name: frozenset(source) for name, (_, source) in _PLACEHOLDERS.items() if isinstance(source, tuple)}

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
    """`demo_templates/<name>`: a JSON list of objects with exactly `IntentSpec`'s fields."""
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
        if entry["ask"] is not None and entry["ask"] not in _PLACEHOLDERS:
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
_ASK: dict[str, tuple[str, ...]] = _TURNS["ask"]
_INFORM: dict[str, tuple[str, ...]] = _TURNS["inform"]
_AFTER_INFORM: tuple[str, ...] = _TURNS["after_inform"]
_DIALOGUE_ACTS: dict[str, dict[str, tuple[str, ...]]] = _TURNS["dialogue_acts"]
_GREETING_OPENERS: tuple[str, ...] = _TURNS["greeting_openers"]
_SWITCH_OPENERS: tuple[str, ...] = _TURNS["switch_openers"]
_CLOSERS: tuple[str, ...] = _TURNS["closers"]

INFORM_INTENTS: tuple[str, ...] = tuple(f"inform_{slot_type}" for slot_type in _INFORM)
DIALOGUE_ACT_INTENTS: tuple[str, ...] = tuple(_DIALOGUE_ACTS)
INTENTS: tuple[str, ...] = MAIN_INTENTS + INFORM_INTENTS + DIALOGUE_ACT_INTENTS

DSTS_RULE = (
    "D-STS scores of the demo corpus are assigned by a rule on each sentence's intent and slot "
    "values, not by annotators: 5 = same intent and identical slot values (the same slot types "
    "filled with the same values; two sentences without slots count as identical), i.e. "
    "paraphrases; 4 = same intent, different slot values (a slot type only one sentence has, or "
    "a shared slot type with different values); 3 = different intents of the same intent group; "
    "2 = intents of different groups whose sentences share at least one slot type (both name an "
    "order number, a product, a city, ...); 1 = different groups and no shared slot type. "
    "Intent groups: " + "; ".join(f"{group}: {', '.join(names)}" for group, names in INTENT_GROUPS.items())
    + ". Slot types: " + ", ".join(sorted({slot_type for slot_type, _ in _PLACEHOLDERS.values()}))
    + ". Pairs are sampled stratified, an equal share per score; the second sentence of a score-5 "
    "pair is rendered from another held-out template of the same intent with the first sentence's "
    "slot values. All evaluation sentences are user requests of held-out dialogues, written with "
    "templates the training corpus never uses."
)

# ---------------------------------------------------------------------------------------------
# Rendering.

_FIELDS: dict[str, tuple[str, ...]] = {}


def template_fields(template: str) -> tuple[str, ...]:
    """The placeholder names of `template`, in order (parsed once per template)."""
    fields = _FIELDS.get(template)
    if fields is None:
        fields = tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)
        _FIELDS[template] = fields
    return fields


def _sample(placeholder: str, rng: random.Random) -> str:
    source = _PLACEHOLDERS[placeholder][1]
    return rng.choice(source) if isinstance(source, tuple) else source(rng)


def _fits(placeholder: str, value: str) -> bool:
    pool = _POOL_SETS.get(placeholder)
    return pool is None or value in pool


def _render(template: str, rng: random.Random, state: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Fills `template`, reusing the dialogue's value of a slot type where it fits.

    New values are stored in `state` (slot type -> value), so later turns refer to the same
    order, product or email. Returns the text and its slots as sorted (slot type, value) pairs.
    """
    filled = {}
    for name in template_fields(template):
        slot_type = _PLACEHOLDERS[name][0]
        value = state.get(slot_type)
        if value is None or not _fits(name, value):
            value = _sample(name, rng)
            state[slot_type] = value
        filled[name] = value
    slots = tuple(sorted({_PLACEHOLDERS[name][0]: value for name, value in filled.items()}.items()))
    return template.format(**filled), slots


def _render_with(template: str, slots: tuple[tuple[str, str], ...]) -> str | None:
    """`template` filled with exactly `slots`; None when the slot types differ or a value does not fit."""
    values = dict(slots)
    fields = template_fields(template)
    if sorted(_PLACEHOLDERS[name][0] for name in fields) != sorted(values):
        return None
    filled = {name: values[_PLACEHOLDERS[name][0]] for name in fields}
    if not all(_fits(name, value) for name, value in filled.items()):
        return None
    return template.format(**filled)


def _after_opener(template: str) -> str:
    # "Also, where is ..." but "Also, I ordered ..." and "Also, DPD says ..." (a placeholder
    # may start with a proper name, so it is never lower-cased).
    first_word = template.split(" ", 1)[0]
    if template.startswith("{") or first_word == "I" or first_word.startswith("I'"):
        return template
    return template[0].lower() + template[1:]


@dataclasses.dataclass(frozen=True)
class DemoUtterance:
    """One generated utterance with the metadata the evaluation rules use.

    `slots` are sorted (slot type, value) pairs of the values the template was filled with;
    `template` is the request template (empty for agent turns and dialogue acts).
    """

    speaker: str
    text: str
    intent: str
    slots: tuple[tuple[str, str], ...] = ()
    template: str = ""

    @property
    def group(self) -> str:
        return INTENT_SPECS[self.intent].group if self.intent in INTENT_SPECS else self.intent


def _agent(intent: str, *parts: str) -> DemoUtterance:
    return DemoUtterance(AGENT, " ".join(part for part in parts if part), intent)


def _episode(rng: random.Random, spec: IntentSpec, state: dict[str, str], opener: str,
             held_out: bool) -> list[DemoUtterance]:
    """The user's request of `spec`, the agent's question and the user's reply if a detail is missing, the answer."""
    template = rng.choice(spec.held_out if held_out else spec.user)
    text, slots = _render(_after_opener(template) if opener else template, rng, state)
    closer = rng.choice(_CLOSERS) if rng.random() < 0.15 else ""
    turns = [DemoUtterance(USER, opener + text + closer, spec.name, slots, template)]
    acknowledge = rng.choice(spec.acknowledge)
    needed = _PLACEHOLDERS[spec.ask][0] if spec.ask else None
    if needed is not None and needed not in state:
        turns.append(_agent(spec.name, acknowledge, rng.choice(_ASK[needed])))
        value = _sample(spec.ask, rng)
        state[needed] = value
        reply = rng.choice(_INFORM[needed]).format(**{needed: value})
        turns.append(DemoUtterance(USER, reply, f"inform_{needed}", ((needed, value),)))
        answer, _ = _render(rng.choice(spec.answer), rng, state)
        turns.append(_agent(spec.name, rng.choice(_AFTER_INFORM), answer))
    else:
        answer, _ = _render(rng.choice(spec.answer), rng, state)
        turns.append(_agent(spec.name, acknowledge if rng.random() < 0.6 else "", answer))
    return turns


def _act_pair(rng: random.Random, act: str) -> list[DemoUtterance]:
    return [DemoUtterance(USER, rng.choice(_DIALOGUE_ACTS[act][USER]), act),
            DemoUtterance(AGENT, rng.choice(_DIALOGUE_ACTS[act][AGENT]), act)]


def _second_intent(rng: random.Random, first: IntentSpec) -> IntentSpec:
    # Real switches mostly stay near the first problem (a refund after a return, an invoice
    # after a failed payment); some jump anywhere.
    same_group = [name for name in INTENT_GROUPS[first.group] if name != first.name]
    if rng.random() < 0.6:
        return INTENT_SPECS[rng.choice(same_group)]
    return INTENT_SPECS[rng.choice([name for name in MAIN_INTENTS if name != first.name])]


def _dialogue_utterances(rng: random.Random, held_out: bool) -> list[DemoUtterance]:
    state: dict[str, str] = {}
    first = INTENT_SPECS[rng.choice(MAIN_INTENTS)]
    greeting = _act_pair(rng, "greeting") if rng.random() < 0.35 else []
    opener = "" if greeting or rng.random() < 0.7 else rng.choice(_GREETING_OPENERS)
    episodes = _episode(rng, first, state, opener, held_out)
    if rng.random() < 0.3:
        episodes += _episode(rng, _second_intent(rng, first), state, rng.choice(_SWITCH_OPENERS), held_out)
    thanks = _act_pair(rng, "thanks") if rng.random() < 0.75 else []
    goodbye = _act_pair(rng, "goodbye") if rng.random() < 0.5 else []
    # Optional pairs give way, greeting first, so the longest draw still fits MAX_TURNS;
    # a lone short episode gets its closing thanks so the shortest reaches MIN_TURNS.
    if len(greeting) + len(episodes) + len(thanks) + len(goodbye) > MAX_TURNS:
        greeting = []
    if len(episodes) + len(thanks) + len(goodbye) > MAX_TURNS:
        goodbye = []
    if len(greeting) + len(episodes) + len(thanks) + len(goodbye) < MIN_TURNS:
        thanks = _act_pair(rng, "thanks")
    return greeting + episodes + thanks + goodbye


def generate_utterance_dialogues(num_dialogues: int, seed: int | str,
                                 held_out: bool = False) -> list[list[DemoUtterance]]:
    """Dialogues as lists of `DemoUtterance` (with slots), from `random.Random(seed)` only.

    `held_out=True` draws every user request from the held-out templates, for evaluation
    dialogues; everything else (agent turns, informs, dialogue acts) is shared.
    """
    if num_dialogues < 0:
        raise ValueError(f"num_dialogues must be >= 0, got {num_dialogues}")
    rng = random.Random(seed)
    return [_dialogue_utterances(rng, held_out) for _ in range(num_dialogues)]


def generate_dialogues(num_dialogues: int = 3000, seed: int = 0) -> list[Dialogue]:
    """The demo training corpus: `num_dialogues` dialogues, identical for the same seed.

    Ids are "demo-<seed>-<index>"; speakers "user"/"agent"; every turn has an intent.
    """
    return [
        Dialogue(
            dialogue_id=f"demo-{seed}-{index:05d}",
            turns=tuple(Turn(speaker=u.speaker, text=u.text, intent=u.intent) for u in utterances),
        )
        for index, utterances in enumerate(generate_utterance_dialogues(num_dialogues, seed))
    ]


def distinct_texts(dialogues: Iterable[Dialogue]) -> list[str]:
    """Every utterance text once, in order of first occurrence."""
    return list(dict.fromkeys(turn.text for dialogue in dialogues for turn in dialogue.turns))


def eval_seed(seed: int) -> str:
    # A string seed gives an independent stream; str seeding is SHA-512 based, so it does not
    # depend on PYTHONHASHSEED.
    return f"demo-eval-{seed}"


def generate_eval_utterances(num_dialogues: int, seed: int,
                             exclude: Iterable[str] = ()) -> tuple[list[DemoUtterance], int]:
    """The evaluation sentences: distinct user requests of main intents from held-out dialogues.

    Dialogues come from `eval_seed(seed)` with held-out request templates. Texts in `exclude`
    (the training utterances) are removed; returns (utterances, number removed that way).
    """
    excluded = set(exclude)
    seen: set[str] = set()
    kept, removed = [], 0
    for utterances in generate_utterance_dialogues(num_dialogues, eval_seed(seed), held_out=True):
        for utterance in utterances:
            if utterance.speaker != USER or utterance.intent not in INTENT_SPECS or utterance.text in seen:
                continue
            seen.add(utterance.text)
            if utterance.text in excluded:
                removed += 1
                continue
            kept.append(utterance)
    return kept, removed


# ---------------------------------------------------------------------------------------------
# D-STS.


def dsts_score(a: DemoUtterance, b: DemoUtterance) -> int:
    """The D-STS score of a pair by the module's rule (see `DSTS_RULE`)."""
    if a.intent == b.intent:
        return 5 if a.slots == b.slots else 4
    if a.group == b.group:
        return 3
    if {slot_type for slot_type, _ in a.slots} & {slot_type for slot_type, _ in b.slots}:
        return 2
    return 1


def _paraphrase(rng: random.Random, utterance: DemoUtterance, excluded: set[str]) -> DemoUtterance | None:
    """Another held-out template of the same intent filled with the same slot values, if any."""
    options = []
    for template in INTENT_SPECS[utterance.intent].held_out:
        text = _render_with(template, utterance.slots) if template != utterance.template else None
        if text is not None and text != utterance.text and text not in excluded:
            options.append((template, text))
    if not options:
        return None
    template, text = rng.choice(options)
    return DemoUtterance(USER, text, utterance.intent, utterance.slots, template)


def sample_dsts_pairs(utterances: Sequence[DemoUtterance], num_pairs: int, seed: int | str,
                      exclude: Iterable[str] = ()) -> list[tuple[int, DemoUtterance, DemoUtterance]]:
    """Samples `num_pairs` scored pairs, stratified over the 5 scores; deterministic for a seed.

    Each score gets `num_pairs // 5` pairs, the remainder going to the lowest scores. For each
    score, candidate pairs are drawn where that score is likely and kept only when `dsts_score`
    gives exactly it; no unordered text pair repeats and a pair's texts differ. A score that runs
    out of candidates (tiny pools) gets fewer pairs. Score-5 partners are rendered paraphrases
    (not in `exclude`). Returns (score, a, b) in shuffled order.
    """
    if num_pairs < 0:
        raise ValueError(f"num_pairs must be >= 0, got {num_pairs}")
    if not utterances or num_pairs == 0:
        return []
    rng = random.Random(seed)
    excluded = set(exclude)
    by_intent: dict[str, list[DemoUtterance]] = {}
    by_group: dict[str, list[DemoUtterance]] = {}
    by_slot_type: dict[str, list[DemoUtterance]] = {}
    for u in utterances:
        by_intent.setdefault(u.intent, []).append(u)
        by_group.setdefault(u.group, []).append(u)
        for slot_type, _ in u.slots:
            by_slot_type.setdefault(slot_type, []).append(u)
    with_slots = [u for u in utterances if u.slots]

    def candidate(score: int) -> tuple[DemoUtterance, DemoUtterance | None]:
        if score == 5:
            a = rng.choice(utterances)
            return a, _paraphrase(rng, a, excluded)
        if score == 4:
            a = rng.choice(utterances)
            return a, rng.choice(by_intent[a.intent])
        if score == 3:
            a = rng.choice(utterances)
            return a, rng.choice(by_group[a.group])
        if score == 2 and with_slots:
            a = rng.choice(with_slots)
            return a, rng.choice(by_slot_type[rng.choice(a.slots)[0]])
        return rng.choice(utterances), rng.choice(utterances)

    base, remainder = divmod(num_pairs, NUM_STS_SCORES)
    pairs: list[tuple[int, DemoUtterance, DemoUtterance]] = []
    seen: set[frozenset[str]] = set()
    for score in range(1, NUM_STS_SCORES + 1):
        target = base + (1 if score <= remainder else 0)
        found, attempts = 0, 0
        while found < target and attempts < 50 * target:
            attempts += 1
            a, b = candidate(score)
            if b is None or a.text == b.text or dsts_score(a, b) != score:
                continue
            key = frozenset((a.text, b.text))
            if key in seen:
                continue
            seen.add(key)
            pairs.append((score, a, b) if rng.random() < 0.5 else (score, b, a))
            found += 1
    rng.shuffle(pairs)
    return pairs


# ---------------------------------------------------------------------------------------------
# The stage.

TRAIN_FILE = "train.jsonl"
TRAIN_SENTENCES_FILE = "train_sentences.txt"
SR_FILE = os.path.join("sr", "select.txt")
STS_FILE = os.path.join("sts", "sts.txt")
STS_METADATA_FILE = os.path.join("sts", "sts_metadata.jsonl")
INTENT_FILE = os.path.join("intent", "intent.json")
DIALOGUES_FILE = os.path.join("dialogues", "eval_dialogues.jsonl")
STATS_FILE = "demo_stats.json"
# The intent group whose requests are the out-of-scope queries of the intent set: its intents
# get no prototype, as CLINC150's oos queries have no intent among its 150.
OOS_GROUP = "rewards"


@dataclasses.dataclass(frozen=True)
class DemoCorpusConfig:
    """The demo corpus: training dialogues plus held-out SR and D-STS sets."""

    output_dir: str
    num_dialogues: int = 3000
    num_eval_dialogues: int = 1000
    random_seed: int = 0
    num_sr_candidates: int = 100
    max_sr_positives: int = 30
    num_sts_pairs: int = 800
    intent_support_fraction: float = 0.5


def split_intent_set(utterances: Sequence[DemoUtterance], support_fraction: float, seed: int | str) -> dict:
    """The intent set (the CLINC150 object layout `data/intent.py` reads) from evaluation sentences.

    Per intent, the sentences are shuffled with `random.Random(seed)` and the first
    `support_fraction` (rounded up) go to the support pool (`train`), the rest to `test`.
    Intents of `OOS_GROUP` go to `oos_train` / `oos_test` the same way: out-of-scope queries.
    """
    rng = random.Random(seed)
    by_intent: dict[str, list[str]] = {}
    for utterance in utterances:
        by_intent.setdefault(utterance.intent, []).append(utterance.text)
    split: dict[str, list] = {"train": [], "test": [], "oos_train": [], "oos_test": []}
    for intent in sorted(by_intent):
        texts = by_intent[intent]
        rng.shuffle(texts)
        cut = math.ceil(len(texts) * support_fraction)
        oos = INTENT_SPECS[intent].group == OOS_GROUP
        label = OOS_LABEL if oos else intent
        split["oos_train" if oos else "train"] += [[text, label] for text in texts[:cut]]
        split["oos_test" if oos else "test"] += [[text, label] for text in texts[cut:]]
    return split


def labelled_eval_dialogues(num_dialogues: int, seed: int) -> list[Dialogue]:
    """The held-out evaluation dialogues (the stream the evaluation sentences come from), each
    with `services` = the intent groups of its requests, for the dialogue-level evaluations:
    a dialogue with one group is labelled by it, one that switches groups is dropped there."""
    dialogues = []
    for index, utterances in enumerate(generate_utterance_dialogues(num_dialogues, eval_seed(seed), held_out=True)):
        groups = tuple(sorted({u.group for u in utterances if u.intent in INTENT_SPECS}))
        dialogues.append(Dialogue(
            dialogue_id=f"demo-eval-{seed}-{index:05d}",
            turns=tuple(Turn(speaker=u.speaker, text=u.text, intent=u.intent) for u in utterances),
            services=groups))
    return dialogues


def _write_lines(path: str, lines: Iterable[str]) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def _utterance_metadata(u: DemoUtterance) -> dict:
    return {"intent": u.intent, "group": u.group, "slots": dict(u.slots)}


def run_generate_demo_corpus(config: DemoCorpusConfig, log=print) -> dict:
    """Writes the demo corpus and its evaluation sets into `config.output_dir`; returns the stats.

    Files: train.jsonl (`write_jsonl`), train_sentences.txt (distinct training utterances, for
    fitting whitening / flow), sr/select.txt, sts/sts.txt, sts/sts_metadata.jsonl (per pair:
    score, sentences, intents, groups, slots), intent/intent.json (`split_intent_set`),
    dialogues/eval_dialogues.jsonl (`labelled_eval_dialogues`), config.json and demo_stats.json. Everything is
    generated before the first file is written, so a run that fails leaves no partial corpus.
    """
    if config.num_dialogues < 1 or config.num_eval_dialogues < 1:
        raise ValueError(f"need num_dialogues >= 1 and num_eval_dialogues >= 1, got "
                         f"{config.num_dialogues}, {config.num_eval_dialogues}")
    if config.num_sts_pairs < NUM_STS_SCORES:
        raise ValueError(f"num_sts_pairs must be >= {NUM_STS_SCORES} (one per score), got {config.num_sts_pairs}")
    if config.num_sr_candidates < 1 or config.max_sr_positives < 1:
        raise ValueError(f"need num_sr_candidates >= 1 and max_sr_positives >= 1, got "
                         f"{config.num_sr_candidates}, {config.max_sr_positives}")
    if not 0.0 < config.intent_support_fraction < 1.0:
        raise ValueError(f"intent_support_fraction must be in (0, 1), got {config.intent_support_fraction}")
    start = time.perf_counter()
    out = config.output_dir
    if os.path.exists(out) and not os.path.isdir(out):
        raise FileExistsError(f"output_dir {out} exists and is not a folder")

    dialogues = generate_dialogues(config.num_dialogues, config.random_seed)
    generation_seconds = time.perf_counter() - start
    train_texts = distinct_texts(dialogues)
    turns = sum(len(d.turns) for d in dialogues)
    log(f"[demo] {len(dialogues)} training dialogues, {turns} turns, {len(train_texts)} distinct "
        f"utterances ({generation_seconds:.2f} s)")

    eval_utterances, overlap = generate_eval_utterances(config.num_eval_dialogues, config.random_seed, train_texts)
    log(f"[demo] {len(eval_utterances)} held-out evaluation sentences from {config.num_eval_dialogues} "
        f"dialogues ({overlap} removed as training text)")

    rows, sr_stats = build_sr_set([(u.text, u.intent) for u in eval_utterances],
                                  config.num_sr_candidates, config.max_sr_positives)
    log(f"[demo] {len(rows)} SR queries (mean {sr_stats['mean_positives']:.1f} positives, "
        f"{sr_stats['mean_negatives']:.1f} negatives)")

    pairs = sample_dsts_pairs(eval_utterances, config.num_sts_pairs, f"demo-sts-{config.random_seed}", train_texts)
    per_score = {str(score): sum(1 for s, _, _ in pairs if s == score) for score in range(1, NUM_STS_SCORES + 1)}
    log(f"[demo] {len(pairs)} D-STS pairs, per score {per_score}")

    intent_set = split_intent_set(eval_utterances, config.intent_support_fraction,
                                  f"demo-intent-{config.random_seed}")
    eval_dialogues = labelled_eval_dialogues(config.num_eval_dialogues, config.random_seed)
    single_group = sum(1 for d in eval_dialogues if len(d.services) == 1)
    log(f"[demo] intent set: {len(intent_set['train'])} support / {len(intent_set['test'])} test sentences, "
        f"{len(intent_set['oos_train'])} / {len(intent_set['oos_test'])} out-of-scope ({OOS_GROUP}); "
        f"{single_group} of {len(eval_dialogues)} evaluation dialogues stay within one intent group")

    intent_counts: dict[str, int] = {}
    for dialogue in dialogues:
        for turn in dialogue.turns:
            intent_counts[turn.intent] = intent_counts.get(turn.intent, 0) + 1
    turn_histogram: dict[str, int] = {}
    for dialogue in dialogues:
        turn_histogram[str(len(dialogue.turns))] = turn_histogram.get(str(len(dialogue.turns)), 0) + 1

    write_jsonl(dialogues, os.path.join(out, TRAIN_FILE))
    _write_lines(os.path.join(out, TRAIN_SENTENCES_FILE), train_texts)
    write_select_file(rows, os.path.join(out, SR_FILE))
    write_json(os.path.join(out, INTENT_FILE), intent_set)
    write_jsonl(eval_dialogues, os.path.join(out, DIALOGUES_FILE))
    _write_lines(os.path.join(out, STS_FILE), (f"{score}\t{a.text}\t{b.text}" for score, a, b in pairs))
    _write_lines(os.path.join(out, STS_METADATA_FILE), (
        json.dumps({"score": score, "sentence_a": a.text, "sentence_b": b.text,
                    "a": _utterance_metadata(a), "b": _utterance_metadata(b)}, ensure_ascii=False)
        for score, a, b in pairs))
    log(f"[demo] wrote {TRAIN_FILE}, {TRAIN_SENTENCES_FILE}, {SR_FILE}, {STS_FILE}, {STS_METADATA_FILE}, "
        f"{INTENT_FILE} and {DIALOGUES_FILE} into {out}")
    stats = {
        "dialogues": len(dialogues),
        "turns": turns,
        "turns_per_dialogue": dict(sorted(turn_histogram.items(), key=lambda item: int(item[0]))),
        "utterances_distinct": len(train_texts),
        "intents": len(intent_counts),
        "utterances_per_intent": dict(sorted(intent_counts.items())),
        "eval_dialogues": config.num_eval_dialogues,
        "eval_sentences": len(eval_utterances),
        "eval_overlap_removed": overlap,
        "sr_queries": len(rows),
        "sr": sr_stats,
        "sts_pairs": len(pairs),
        "sts_pairs_per_score": per_score,
        "intent_support": len(intent_set["train"]),
        "intent_test": len(intent_set["test"]),
        "intent_oos_support": len(intent_set["oos_train"]),
        "intent_oos_test": len(intent_set["oos_test"]),
        "intent_oos_group": OOS_GROUP,
        "eval_dialogues_single_group": single_group,
        "generation_seconds": round(generation_seconds, 3),
        "total_seconds": round(time.perf_counter() - start, 3),
    }
    write_config(config, out)
    write_json(os.path.join(out, STATS_FILE), stats)
    log(f"[demo] done in {stats['total_seconds']:.2f} s -> {os.path.join(out, STATS_FILE)}")
    return stats
