"""Labelled dialogues for dial2vec's dialogue-level evaluations, and the metrics they share.

The set (dial2vec, section 4.1; its `data/generate_clustering.py`): the dialogues of an SGD
folder or file (or a JSON Lines corpus with `services`) that belong to exactly ONE service,
labelled by that service (`label="service"`, as dial2vec's released sets label SGD: the paper's
"service field", L158, and Table 1's 45 SGD "domains", SGD's service count) or by its domain
(`label="domain"`, the service name before "_"). Dropped and counted in `stats`: dialogues with
several services (as dial2vec drops multi-domain sessions) or none, dialogues without exactly
two interlocutors, and dialogues whose label no other dialogue shares (no relevant item to
retrieve, no pair to relate; the release keeps them, which changes k, N and the Spearman mean
it scores them into with 0). Turns are taken as read, without merging or length filters (the
release's `generate_clustering.py` has no turn filter; it drops empty utterances, as the SGD
reader does, counted in `stats` as "empty_turns_skipped").
"""

from __future__ import annotations

import collections
import dataclasses
import os

import numpy as np

from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import read_corpus
from dialoguecse_tf.evaluation.metrics import unit_rows

DIALOGUE_LABELS = ("service", "domain")


@dataclasses.dataclass(frozen=True)
class LabelledDialogues:
    path: str
    dialogues: tuple
    labels: tuple
    stats: dict


def read_labelled_dialogues(path: str, label: str = "service") -> LabelledDialogues:
    if label not in DIALOGUE_LABELS:
        raise ValueError(f"dialogue label must be one of {DIALOGUE_LABELS}, got {label!r}")
    input_format = "jsonl" if str(path).endswith(".jsonl") else "sgd"
    dropped = collections.Counter()
    kept = []
    read_stats = PrepStats()
    for dialogue in read_corpus(path, input_format, stats=read_stats):
        services = dialogue.services or ()
        if len(services) != 1:
            dropped["multi_service" if services else "no_service"] += 1
        elif len({turn.speaker for turn in dialogue.turns}) != 2:
            dropped["not_two_interlocutors"] += 1
        else:
            kept.append((dialogue, services[0] if label == "service" else services[0].split("_")[0]))
    counts = collections.Counter(value for _, value in kept)
    singles = [d for d, value in kept if counts[value] < 2]
    if singles:
        dropped["label_with_one_dialogue"] += len(singles)
        kept = [(d, value) for d, value in kept if counts[value] >= 2]
    if len({value for _, value in kept}) < 2:
        raise ValueError(f"{path}: dialogue evaluation needs at least 2 labels with 2 dialogues each; "
                         f"dropped {dict(dropped)}")
    stats = {"dialogues": len(kept), "labels": len({value for _, value in kept}), "dropped": dict(dropped),
             "empty_turns_skipped": read_stats["empty_turns_skipped"]}
    return LabelledDialogues(os.fspath(path), tuple(d for d, _ in kept), tuple(v for _, v in kept), stats)


def similarity_and_relevance(vectors, labels) -> tuple[np.ndarray, np.ndarray]:
    """[N, N] cosine similarities and same-label indicator; the diagonal is not used."""
    unit = unit_rows(vectors)
    labels = np.asarray(labels)
    return unit @ unit.T, labels[:, None] == labels[None, :]


def off_diagonal(matrix: np.ndarray) -> np.ndarray:
    """[N, N] -> [N, N - 1]: each row without its own column."""
    n = matrix.shape[0]
    return matrix[~np.eye(n, dtype=bool)].reshape(n, n - 1)
