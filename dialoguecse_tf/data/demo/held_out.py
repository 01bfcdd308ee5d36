"""The demo corpus's evaluation sets (paper section 5.1.2, in the released files' formats).

They are built from separate dialogues (`num_eval_dialogues`, drawn from a stream seeded with
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
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence

from dialoguecse_tf.data.demo.dialogues import USER, DemoUtterance, generate_utterance_dialogues
from dialoguecse_tf.data.demo.templates import INTENT_GROUPS, INTENT_SPECS, PLACEHOLDERS, render_with
from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.intent import OOS_LABEL

NUM_STS_SCORES = 5
# The intent group whose requests are the out-of-scope queries of the intent set: its intents
# get no prototype, as CLINC150's oos queries have no intent among its 150.
OOS_GROUP = "rewards"

DSTS_RULE = (
    "D-STS scores of the demo corpus are assigned by a rule on each sentence's intent and slot "
    "values, not by annotators: 5 = same intent and identical slot values (the same slot types "
    "filled with the same values; two sentences without slots count as identical), i.e. "
    "paraphrases; 4 = same intent, different slot values (a slot type only one sentence has, or "
    "a shared slot type with different values); 3 = different intents of the same intent group; "
    "2 = intents of different groups whose sentences share at least one slot type (both name an "
    "order number, a product, a city, ...); 1 = different groups and no shared slot type. "
    "Intent groups: " + "; ".join(f"{group}: {', '.join(names)}" for group, names in INTENT_GROUPS.items())
    + ". Slot types: " + ", ".join(sorted({slot_type for slot_type, _ in PLACEHOLDERS.values()}))
    + ". Pairs are sampled stratified, an equal share per score; the second sentence of a score-5 "
    "pair is rendered from another held-out template of the same intent with the first sentence's "
    "slot values. All evaluation sentences are user requests of held-out dialogues, written with "
    "templates the training corpus never uses."
)


def eval_seed(seed: int) -> str:
    """The seed of the held-out dialogues' stream.

    Args:
      seed: the corpus's `random_seed`.

    Returns:
      A string seed, "demo-eval-<seed>".
    """
    # A string seed gives an independent stream; str seeding is SHA-512 based, so it does not
    # depend on PYTHONHASHSEED.
    return f"demo-eval-{seed}"


def generate_eval_utterances(num_dialogues: int, seed: int,
                             exclude: Iterable[str] = ()) -> tuple[list[DemoUtterance], int]:
    """The evaluation sentences: distinct user requests of main intents from held-out dialogues.

    Args:
      num_dialogues: how many held-out dialogues to draw, from `eval_seed(seed)` with held-out
        request templates.
      seed: the corpus's `random_seed`.
      exclude: texts to remove (the training utterances).

    Returns:
      (the sentences in order of first occurrence, how many `exclude` removed).
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
    """The D-STS score of a pair by the module's rule (see `DSTS_RULE`).

    Args:
      a, b: the two sentences, with their intents and slots.

    Returns:
      The score, 1 to 5; symmetric in `a` and `b`.
    """
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
        text = render_with(template, utterance.slots) if template != utterance.template else None
        if text is not None and text != utterance.text and text not in excluded:
            options.append((template, text))
    if not options:
        return None
    template, text = rng.choice(options)
    return DemoUtterance(USER, text, utterance.intent, utterance.slots, template)


def sample_dsts_pairs(utterances: Sequence[DemoUtterance], num_pairs: int, seed: int | str,
                      exclude: Iterable[str] = ()) -> list[tuple[int, DemoUtterance, DemoUtterance]]:
    """Samples scored pairs, stratified over the 5 scores; deterministic for a seed.

    Each score gets `num_pairs // 5` pairs, the remainder going to the lowest scores. For each
    score, candidate pairs are drawn where that score is likely and kept only when `dsts_score`
    gives exactly it; no unordered text pair repeats and a pair's texts differ. A score that runs
    out of candidates (tiny pools) gets fewer pairs.

    Args:
      utterances: the evaluation sentences.
      num_pairs: how many pairs to sample (>= 0).
      seed: the sampling stream's seed.
      exclude: texts a score-5 partner (a rendered paraphrase) must not be.

    Returns:
      (score, a, b) triples in shuffled order.
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


def split_intent_set(utterances: Sequence[DemoUtterance], support_fraction: float, seed: int | str) -> dict:
    """The intent set (the CLINC150 object layout `data/intent.py` reads) from evaluation sentences.

    Args:
      utterances: the evaluation sentences.
      support_fraction: the share of each intent's sentences (rounded up) in the support pool.
      seed: the stream that shuffles each intent's sentences.

    Returns:
      {"train": support, "test": queries, "oos_train", "oos_test"}, each a list of [text, label]:
      per intent, the first `support_fraction` of its shuffled sentences go to `train`, the rest
      to `test`; intents of `OOS_GROUP` go to `oos_train` / `oos_test` the same way, labelled
      `OOS_LABEL`: out-of-scope queries.
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
    """The held-out evaluation dialogues (the stream the evaluation sentences come from).

    Args:
      num_dialogues: how many.
      seed: the corpus's `random_seed`.

    Returns:
      The dialogues, ids "demo-eval-<seed>-<index>", each with `services` = the intent groups of
      its requests, for the dialogue-level evaluations: a dialogue with one group is labelled by
      it, one that switches groups is dropped there.
    """
    dialogues = []
    for index, utterances in enumerate(generate_utterance_dialogues(num_dialogues, eval_seed(seed), held_out=True)):
        groups = tuple(sorted({u.group for u in utterances if u.intent in INTENT_SPECS}))
        dialogues.append(Dialogue(
            dialogue_id=f"demo-eval-{seed}-{index:05d}",
            turns=tuple(Turn(speaker=u.speaker, text=u.text, intent=u.intent) for u in utterances),
            services=groups))
    return dialogues
