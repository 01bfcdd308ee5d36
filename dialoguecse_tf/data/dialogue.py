"""The corpus-independent dialogue representation every reader produces."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class Turn:
    """One utterance. `speaker` is an opaque label ("0"/"1", "user"/"agent", ...)."""

    speaker: str
    text: str
    intent: str | None = None


@dataclasses.dataclass(frozen=True)
class Dialogue:
    """A dialogue session, or one contrastive training sample of the authors' format.

    `response_index`, `candidates` and `candidate_labels` are set only for the authors'
    contrastive format: there a line is one response (turns[response_index]) with a fixed
    candidate list whose entry 0 is that response. `source` and `line_number` locate the
    record in its input file so later stages can report problems precisely. `services` names
    the task domains of the dialogue where the corpus annotates them (SGD's "services", e.g.
    ("Restaurants_2",)), so dialogues can later be labelled by domain; None elsewhere.
    """

    dialogue_id: str
    turns: tuple[Turn, ...]
    response_index: int | None = None
    candidates: tuple[str, ...] | None = None
    candidate_labels: tuple[int, ...] | None = None
    source: str = ""
    line_number: int = 0
    services: tuple[str, ...] | None = None


def turn_intent(act_names: Iterable[str]) -> str | None:
    """The one intent label of a turn annotated with dialogue acts: its first act, or None.

    The paper (section 5.1.1) gives MDC "11 identical intents" per domain, as MDC's release
    does (github.com/xiul-msr/e2e_dialog_challenge: 11 intents per domain): its 11 dialogue
    acts, listed in TC-Bot's src/deep_dialog/data/dia_acts.txt (github.com/MiuLab/TC-Bot):
    request, inform, confirm_question, confirm_answer, greeting, closing, multiple_choice,
    thanks, welcome, deny, not_sure. A message often carries several acts
    ("greeting() request(taxi)"); labelling it with all of them would turn every combination
    into an SR class of its own, so one act is chosen, and the first in annotation order is
    the rule that needs no ranking of acts. The readers of act-annotated corpora label turns
    with it, and merging a speaker's consecutive utterances keeps the first intent by the same
    rule.
    """
    return next(iter(act_names), None)
