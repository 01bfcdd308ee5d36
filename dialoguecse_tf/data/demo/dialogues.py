"""The demo corpus's dialogues: generated from the templates by seeded rules.

`generate_dialogues(num_dialogues, seed)` draws from `random.Random(seed)` only, so a seed
always gives the same corpus. Speakers strictly alternate "user" / "agent", starting with the
user, so the paper's speaker merging (section 5.1.1) changes nothing, and every dialogue has 4
to 12 turns. A dialogue is: an optional greeting pair; one episode of a main intent; in about
30% of dialogues a second episode after an intent switch ("Also, ..."), usually to an intent of
the same group (a refund after a return, an invoice after a failed payment); then optionally a
thanks pair and a goodbye pair. An episode is the user's request, and when the request lacks
the detail the agent needs (the order number for `order_status`, the email address for
`password_reset`, ...) the agent asks for it and the user supplies it, then the agent resolves
the request. Slot values (order numbers, products, cities, ...) stay consistent within a
dialogue.

Intent labels, on every utterance:
* the 25 main intents of `INTENT_GROUPS` on user requests and on every agent turn of that
  episode (acknowledgement, question for a detail, resolution), since the agent's turn is about
  the conversation's current intent;
* `greeting`, `thanks` and `goodbye` on the opening and closing pairs, both speakers;
* `inform_<slot type>` (`inform_order_number`, `inform_email`, ...) on a user turn that only
  supplies a requested value ("It's 48213."). Such a turn is not labelled with the main intent:
  its text carries nothing of that intent, so the SR set would otherwise call "It's 48213." a
  paraphrase of "Where is my parcel?".
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable

from dialoguecse_tf.data.demo.templates import (
    AFTER_INFORM,
    ASK,
    CLOSERS,
    DIALOGUE_ACTS,
    GREETING_OPENERS,
    INFORM,
    INTENT_GROUPS,
    INTENT_SPECS,
    MAIN_INTENTS,
    PLACEHOLDERS,
    SWITCH_OPENERS,
    IntentSpec,
    render,
    sample_value,
)
from dialoguecse_tf.data.dialogue import Dialogue, Turn

USER = "user"
AGENT = "agent"
MIN_TURNS = 4
MAX_TURNS = 12


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
    text, slots = render(_after_opener(template) if opener else template, rng, state)
    closer = rng.choice(CLOSERS) if rng.random() < 0.15 else ""
    turns = [DemoUtterance(USER, opener + text + closer, spec.name, slots, template)]
    acknowledge = rng.choice(spec.acknowledge)
    needed = PLACEHOLDERS[spec.ask][0] if spec.ask else None
    if needed is not None and needed not in state:
        turns.append(_agent(spec.name, acknowledge, rng.choice(ASK[needed])))
        value = sample_value(spec.ask, rng)
        state[needed] = value
        reply = rng.choice(INFORM[needed]).format(**{needed: value})
        turns.append(DemoUtterance(USER, reply, f"inform_{needed}", ((needed, value),)))
        answer, _ = render(rng.choice(spec.answer), rng, state)
        turns.append(_agent(spec.name, rng.choice(AFTER_INFORM), answer))
    else:
        answer, _ = render(rng.choice(spec.answer), rng, state)
        turns.append(_agent(spec.name, acknowledge if rng.random() < 0.6 else "", answer))
    return turns


def _act_pair(rng: random.Random, act: str) -> list[DemoUtterance]:
    return [DemoUtterance(USER, rng.choice(DIALOGUE_ACTS[act][USER]), act),
            DemoUtterance(AGENT, rng.choice(DIALOGUE_ACTS[act][AGENT]), act)]


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
    opener = "" if greeting or rng.random() < 0.7 else rng.choice(GREETING_OPENERS)
    episodes = _episode(rng, first, state, opener, held_out)
    if rng.random() < 0.3:
        episodes += _episode(rng, _second_intent(rng, first), state, rng.choice(SWITCH_OPENERS), held_out)
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

    Args:
      num_dialogues: how many (>= 0).
      seed: the stream's seed; a string seed gives a stream independent of the integer ones.
      held_out: draw every user request from the held-out templates, for evaluation dialogues;
        everything else (agent turns, informs, dialogue acts) is shared.

    Returns:
      The dialogues, each a list of its utterances.
    """
    if num_dialogues < 0:
        raise ValueError(f"num_dialogues must be >= 0, got {num_dialogues}")
    rng = random.Random(seed)
    return [_dialogue_utterances(rng, held_out) for _ in range(num_dialogues)]


def generate_dialogues(num_dialogues: int = 3000, seed: int = 0) -> list[Dialogue]:
    """The demo training corpus, identical for the same seed.

    Args:
      num_dialogues: how many.
      seed: the stream's seed.

    Returns:
      The dialogues, ids "demo-<seed>-<index>", speakers "user"/"agent", every turn with an intent.
    """
    return [
        Dialogue(
            dialogue_id=f"demo-{seed}-{index:05d}",
            turns=tuple(Turn(speaker=u.speaker, text=u.text, intent=u.intent) for u in utterances),
        )
        for index, utterances in enumerate(generate_utterance_dialogues(num_dialogues, seed))
    ]


def distinct_texts(dialogues: Iterable[Dialogue]) -> list[str]:
    """The distinct utterances of a corpus.

    Args:
      dialogues: the corpus.

    Returns:
      Every utterance text once, in order of first occurrence.
    """
    return list(dict.fromkeys(turn.text for dialogue in dialogues for turn in dialogue.turns))
