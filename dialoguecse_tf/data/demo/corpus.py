"""The demo corpus written: the stage that generates the training dialogues and the held-out
sets and writes them in the released corpora's formats, with its config and stats."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterable

from absl import logging

from dialoguecse_tf.config_fields import field
from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.data.demo.dialogues import DemoUtterance, distinct_texts, generate_dialogues
from dialoguecse_tf.data.demo.held_out import (
    NUM_STS_SCORES,
    OOS_GROUP,
    generate_eval_utterances,
    labelled_eval_dialogues,
    sample_dsts_pairs,
    split_intent_set,
)
from dialoguecse_tf.data.readers import write_jsonl
from dialoguecse_tf.data.sr_builder import build_sr_set, write_select_file
from dialoguecse_tf.io_utils import atomic_open, write_json

TRAIN_FILE = "train.jsonl"
TRAIN_SENTENCES_FILE = "train_sentences.txt"
SR_FILE = os.path.join("sr", "select.txt")
STS_FILE = os.path.join("sts", "sts.txt")
STS_METADATA_FILE = os.path.join("sts", "sts_metadata.jsonl")
INTENT_FILE = os.path.join("intent", "intent.json")
DIALOGUES_FILE = os.path.join("dialogues", "eval_dialogues.jsonl")
STATS_FILE = "demo_stats.json"


@dataclasses.dataclass(frozen=True)
class DemoCorpusConfig:
    """The demo corpus: training dialogues plus held-out SR, D-STS, intent and dialogue-level sets.
    Its entry point's flags are generated from these fields."""

    output_dir: str = dataclasses.field(metadata={"help": "Folder for train.jsonl, train_sentences.txt, "
                                                          "sr/select.txt, sts/sts.txt, sts/sts_metadata.jsonl, "
                                                          "intent/intent.json, "
                                                          "dialogues/eval_dialogues.jsonl, config.json and "
                                                          "demo_stats.json."})
    num_dialogues: int = field(3000, "Training dialogues to generate.")
    num_eval_dialogues: int = field(1000, "Held-out dialogues whose user requests become the SR, D-STS and intent "
                                          "sentences, and which are the dialogue-level set.")
    random_seed: int = field(0, "Random seed; the same seed always gives the same files.")
    num_sr_candidates: int = field(100, "Sentences BM25 retrieves per SR query (paper: 100).")
    max_sr_positives: int = field(30, "Most positives kept per SR query (paper: 30).")
    num_sts_pairs: int = field(800, "D-STS pairs to sample, an equal share per score 1..5.")
    intent_support_fraction: float = field(0.5, "Share of each intent's evaluation sentences in the intent set's "
                                                "support pool; the rest are its test queries.")


def _write_lines(path: str, lines: Iterable[str]) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def _utterance_metadata(u: DemoUtterance) -> dict:
    return {"intent": u.intent, "group": u.group, "slots": dict(u.slots)}


def run_generate_demo_corpus(config: DemoCorpusConfig) -> dict:
    """Writes the demo corpus and its evaluation sets into `config.output_dir`.

    Files: train.jsonl (`write_jsonl`), train_sentences.txt (distinct training utterances, for
    fitting whitening / flow), sr/select.txt, sts/sts.txt, sts/sts_metadata.jsonl (per pair:
    score, sentences, intents, groups, slots), intent/intent.json (`split_intent_set`),
    dialogues/eval_dialogues.jsonl (`labelled_eval_dialogues`), config.json and demo_stats.json.
    Everything is generated before the first file is written, so a run that fails leaves no
    partial corpus.

    Args:
      config: the corpus's sizes, seed and folder; ValueError on a size the sets cannot have.

    Returns:
      The stats demo_stats.json holds (counts per stage, per intent and per turn count; seconds).
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
    logging.info("[demo] %d training dialogues, %d turns, %d distinct utterances (%.2f s)", len(dialogues), turns,
                 len(train_texts), generation_seconds)

    eval_utterances, overlap = generate_eval_utterances(config.num_eval_dialogues, config.random_seed, train_texts)
    logging.info("[demo] %d held-out evaluation sentences from %d dialogues (%d removed as training text)",
                 len(eval_utterances), config.num_eval_dialogues, overlap)

    rows, sr_stats = build_sr_set([(u.text, u.intent) for u in eval_utterances],
                                  config.num_sr_candidates, config.max_sr_positives)
    logging.info("[demo] %d SR queries (mean %.1f positives, %.1f negatives)", len(rows), sr_stats["mean_positives"],
                 sr_stats["mean_negatives"])

    pairs = sample_dsts_pairs(eval_utterances, config.num_sts_pairs, f"demo-sts-{config.random_seed}", train_texts)
    per_score = {str(score): sum(1 for s, _, _ in pairs if s == score) for score in range(1, NUM_STS_SCORES + 1)}
    logging.info("[demo] %d D-STS pairs, per score %s", len(pairs), per_score)

    intent_set = split_intent_set(eval_utterances, config.intent_support_fraction,
                                  f"demo-intent-{config.random_seed}")
    eval_dialogues = labelled_eval_dialogues(config.num_eval_dialogues, config.random_seed)
    single_group = sum(1 for d in eval_dialogues if len(d.services) == 1)
    logging.info("[demo] intent set: %d support / %d test sentences, %d / %d out-of-scope (%s); %d of %d evaluation "
                 "dialogues stay within one intent group", len(intent_set["train"]), len(intent_set["test"]),
                 len(intent_set["oos_train"]), len(intent_set["oos_test"]), OOS_GROUP, single_group,
                 len(eval_dialogues))

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
    logging.info("[demo] wrote %s, %s, %s, %s, %s, %s and %s into %s", TRAIN_FILE, TRAIN_SENTENCES_FILE, SR_FILE,
                 STS_FILE, STS_METADATA_FILE, INTENT_FILE, DIALOGUES_FILE, out)
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
    logging.info("[demo] done in %.2f s -> %s", stats["total_seconds"], os.path.join(out, STATS_FILE))
    return stats
