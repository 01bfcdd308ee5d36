"""Builds, writes and reads the semantic retrieval (SR) evaluation set (paper section 5.1.2).

File format (`select.txt`, the authors' release): one UTF-8 line per row,
`id \\t sentence \\t intent \\t positive_ids \\t negative_ids`, where `id` is the 0-based line
index and the two id lists are comma-separated ids of other rows of the same file. Every row is
a query: the evaluator ranks its positives + negatives by embedding cosine similarity and
computes MAP / MRR over that ranking.

Construction (`build_sr_set`, step 3 of section 5.1.2): from intent-labelled sentences, every
sentence is a query; BM25 retrieves its `num_candidates` best-scoring other sentences (its own
row and rows with exactly the same text are excluded; only sentences sharing at least one token
with the query are retrieved, as a zero BM25 score means no lexical match at all). A candidate
is positive when its intent equals the query's. The `max_positives` highest-ranked positives
are kept, and the highest-ranked `max_negatives` negatives (all of them by default). Equal
scores are ordered by row id, so the build is deterministic. BM25 is `bm25s` with its default
Lucene variant (k1=1.5, b=0.75), indexed once over all sentences: its term statistics describe
the whole labelled collection.

Rows without positives. In both released dev files (ECD 2,373 rows, JDDC 2,094 rows) every
row has exactly 30 positives and 40 negatives, and every row is referenced by some other row:
there are no candidate-only rows with empty lists. This module follows them: every written row
is a query with at least one positive, and `read_select_file` rejects a row without one. A
sentence whose retrieval finds no positive is therefore removed from the candidate pool too,
and the queries that had retrieved it are retrieved again without it (their next-ranked
candidates move up); this repeats until no query loses its last positive (`stats["rounds"]`
counts the retrieval passes, `stats["dropped_no_positive"]` the removed sentences). The
alternative, keeping such sentences as rows with empty lists, would make every consumer tell
queries from non-queries, which the released format never needs.

Positive and negative ids are written in ascending order, as in the released files: the BM25
rank is construction detail, and leaking it into the candidate order would let an evaluator's
tie-breaking favour lexically similar candidates. The released files' 30 + 40 shape suggests the
authors used `max_negatives=40` and kept only queries with a full 30 positives; the paper does
not say, so neither is a default here, and the reader accepts any list lengths.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
import re
import unicodedata
from collections.abc import Sequence

import bm25s
import numpy as np

from dialoguecse_tf.encoder.cjk import BERT_CJK_RANGES, KANA_RANGE, regex_class
from dialoguecse_tf.io_utils import DataFormatError, atomic_open, read_strict_lines

PathLike = str | os.PathLike

# Han ideographs and Japanese kana: scripts written without spaces between words, so a
# character is the only safe token.
_CJK_RANGES = regex_class((KANA_RANGE,) + BERT_CJK_RANGES)
_TOKEN_RE = re.compile(rf"[{_CJK_RANGES}]|(?:(?![{_CJK_RANGES}])[^\W_])+")


def bm25_tokenize(text: str) -> list[str]:
    """Splits `text` into BM25 terms for English and Chinese alike.

    The text is NFKC-normalised (full-width letters and digits, common in Chinese e-commerce
    text, become ASCII) and lower-cased. Each CJK character (Han or kana) is one token; any
    other run of letters and digits is one token ("Order123" -> "order123"); punctuation,
    symbols, underscores and whitespace only separate tokens. Example:
    `bm25_tokenize("我想退货 Refund ORDER１２３!")`
    -> `["我", "想", "退", "货", "refund", "order123"]`.
    """
    return _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower())


@dataclasses.dataclass(frozen=True)
class SrRow:
    """One row of an SR file; every row is a query over its positive + negative candidates."""

    id: int
    sentence: str
    intent: str
    positive_ids: tuple[int, ...]
    negative_ids: tuple[int, ...]


def build_sr_set(
    items: Sequence[tuple[str, str]],
    num_candidates: int = 100,
    max_positives: int = 30,
    max_negatives: int | None = None,
    min_queries: int = 1,
) -> tuple[list[SrRow], dict]:
    """Builds SR rows from `(sentence, intent)` pairs; returns `(rows, stats)`.

    Identical `(sentence, intent)` pairs are merged (first occurrence kept, counted as
    "duplicates"); sentences with no BM25 token (e.g. punctuation only) cannot be retrieved and
    are dropped ("untokenizable"). The same text under different intents stays as separate rows
    that never retrieve each other ("conflicting_texts" counts such texts). Row ids follow the
    input order of the kept sentences. Raises ValueError on a sentence or intent containing a
    tab or line break (the file format cannot hold it), on an empty intent (an unlabelled
    sentence would be a positive for every other unlabelled one), on bad limits, or when fewer
    than `min_queries` queries remain.

    `stats` keys: input_items, duplicates, untokenizable, conflicting_texts, rounds (retrieval
    passes), dropped_no_positive, queries (= len(rows)), positives_capped (queries that had
    more than `max_positives` positives among their candidates), queries_without_negatives,
    mean_positives, mean_negatives.
    """
    if num_candidates < 1 or max_positives < 1 or (max_negatives is not None and max_negatives < 0):
        raise ValueError(
            f"need num_candidates >= 1, max_positives >= 1, max_negatives None or >= 0; got "
            f"{num_candidates}, {max_positives}, {max_negatives}"
        )
    stats = {"input_items": len(items), "duplicates": 0, "untokenizable": 0}
    seen: set[tuple[str, str]] = set()
    sentences: list[str] = []
    intents: list[str] = []
    tokens: list[list[str]] = []
    for index, (sentence, intent) in enumerate(items):
        problem = _field_problem(sentence, "sentence") or _field_problem(intent, "intent")
        if problem is None and not intent.strip():
            problem = "intent is empty"
        if problem is not None:
            raise ValueError(f"item {index}: {problem}")
        if (sentence, intent) in seen:
            stats["duplicates"] += 1
            continue
        seen.add((sentence, intent))
        sentence_tokens = bm25_tokenize(sentence)
        if not sentence_tokens:
            stats["untokenizable"] += 1
            continue
        sentences.append(sentence)
        intents.append(intent)
        tokens.append(sentence_tokens)

    rows_by_text: dict[str, list[int]] = {}
    for position, sentence in enumerate(sentences):
        rows_by_text.setdefault(sentence, []).append(position)
    stats["conflicting_texts"] = sum(1 for same in rows_by_text.values() if len(same) > 1)

    same_text = [rows_by_text[sentence] for sentence in sentences]
    retrieved, stats["rounds"], stats["dropped_no_positive"] = _retrieve_until_stable(
        tokens, intents, same_text, num_candidates, max_positives, max_negatives
    )

    kept = sorted(retrieved)
    new_id = {position: row_id for row_id, position in enumerate(kept)}
    rows = []
    for position in kept:
        positives, negatives, _ = retrieved[position]
        rows.append(SrRow(
            id=new_id[position],
            sentence=sentences[position],
            intent=intents[position],
            positive_ids=tuple(sorted(new_id[p] for p in positives)),
            negative_ids=tuple(sorted(new_id[n] for n in negatives)),
        ))
    stats["queries"] = len(rows)
    stats["positives_capped"] = sum(1 for _, _, capped in retrieved.values() if capped)
    stats["queries_without_negatives"] = sum(1 for row in rows if not row.negative_ids)
    stats["mean_positives"] = float(np.mean([len(r.positive_ids) for r in rows])) if rows else 0.0
    stats["mean_negatives"] = float(np.mean([len(r.negative_ids) for r in rows])) if rows else 0.0
    if len(rows) < min_queries:
        raise ValueError(f"only {len(rows)} SR queries remain (need at least {min_queries}); stats: {stats}")
    return rows, stats


def _retrieve_until_stable(tokens, intents, same_text, num_candidates, max_positives, max_negatives):
    """Retrieves for every sentence, removing positive-less ones until none is left.

    `same_text[p]` lists the positions whose text equals position p's (p included), which p
    must never retrieve. Returns ({position: (positives, negatives, positives_capped)} for the
    surviving sentences, number of retrieval passes, number of removed sentences). Positions
    are indices into `tokens`; lists are in BM25 rank order.
    """
    if not tokens:
        return {}, 0, 0
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    _, intent_codes = np.unique(np.asarray(intents, dtype=object), return_inverse=True)
    active = np.ones(len(tokens), dtype=bool)
    retrieved: dict[int, tuple[list[int], list[int], bool]] = {}
    top_lists: dict[int, np.ndarray] = {}
    pending = list(range(len(tokens)))
    rounds = 0
    dropped = 0
    while pending:
        rounds += 1
        removed = []
        for query in pending:
            scores = index.get_scores(tokens[query])
            scores[~active] = 0.0
            scores[same_text[query]] = 0.0
            top = _top_candidates(scores, num_candidates)
            same_intent = intent_codes[top] == intent_codes[query]
            positives = top[same_intent]
            if positives.size == 0:
                removed.append(query)
                continue
            negatives = top[~same_intent]
            retrieved[query] = (
                positives[:max_positives].tolist(),
                (negatives if max_negatives is None else negatives[:max_negatives]).tolist(),
                positives.size > max_positives,
            )
            top_lists[query] = top
        if not removed:
            break
        dropped += len(removed)
        active[removed] = False
        for query in removed:
            retrieved.pop(query, None)
            top_lists.pop(query, None)
        # A query's top list only changes if one of its members left the pool.
        pending = [query for query, top in top_lists.items() if not active[top].all()]
    return retrieved, rounds, dropped


def _top_candidates(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best positive scores, best first, equal scores by position."""
    candidates = np.flatnonzero(scores > 0)
    if candidates.size > k:
        # Everything tied with the k-th best score survives the cut, so the position tie-break
        # below decides among them rather than argpartition's arbitrary choice.
        kth_best = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
        candidates = candidates[scores[candidates] >= kth_best]
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order][:k]


def _field_problem(value, name: str) -> str | None:
    if not isinstance(value, str):
        return f"{name} must be a string, got {type(value).__name__}"
    if any(ch in value for ch in "\t\n\r"):
        return f"{name} contains a tab or line break: {value!r}"
    return None


def _row_problem(row: SrRow, index: int, num_rows: int) -> tuple[str, str] | None:
    """The first SR format rule `row` (at 0-based `index` of `num_rows`) breaks, as (reason, message)."""
    if row.id != index:
        return "id_mismatch", f"row id {row.id} is not its 0-based line index {index}"
    for name in ("sentence", "intent"):
        problem = _field_problem(getattr(row, name), name)
        if problem is not None:
            return "bad_field", problem
    if not row.positive_ids:
        return "no_positive", f"query {row.id} has no positive id"
    for name, ids in (("positive", row.positive_ids), ("negative", row.negative_ids)):
        if not ids:
            continue
        outside = [candidate for candidate in (min(ids), max(ids)) if not 0 <= candidate < num_rows]
        if outside:
            return "id_out_of_range", f"{name} id {outside[0]} is not a row of this file (0..{num_rows - 1})"
        if row.id in ids:
            return "self_reference", f"{name} ids contain the row's own id {row.id}"
    overlap = sorted(set(row.positive_ids) & set(row.negative_ids))
    if overlap:
        return "positive_negative_overlap", f"ids {overlap} are both positive and negative"
    return None


def write_select_file(rows: Sequence[SrRow], path: PathLike) -> None:
    """Writes `rows` as a `select.txt` file; raises ValueError on a row the reader would reject.

    The file appears atomically (temporary file + rename), so an interrupted run never leaves a
    truncated evaluation set behind.
    """
    for index, row in enumerate(rows):
        problem = _row_problem(row, index, len(rows))
        if problem is not None:
            raise ValueError(f"row {index}: {problem[1]}")
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write("\t".join((
                str(row.id),
                row.sentence,
                row.intent,
                ",".join(map(str, row.positive_ids)),
                ",".join(map(str, row.negative_ids)),
            )))
            f.write("\n")


def read_select_file(path: PathLike) -> list[SrRow]:
    """Reads and validates a `select.txt` file (the authors' or `write_select_file`'s).

    Lines are split on "\\n" (a trailing "\\r" and a UTF-8 byte-order mark are ignored). Each
    line must have 5 tab-separated fields; the id must equal the 0-based line index; ids are
    plain decimal integers; id lists are comma-separated (empty only for the negatives); every
    referenced id must be another row of the file, never both positive and negative; every row
    needs at least one positive (every row is a query; see the module docstring). An id may
    repeat within a list, as in some of the authors' released files: their eval_selection.py
    keeps every listed id as a candidate, so a repeat is ranked and counted twice, and the
    evaluator does the same (`evaluate.sr_query_counts` counts such queries). An empty intent is allowed (the ECD release has no intent labels). A
    violation raises `DataFormatError` naming the file and 1-based line; an empty file raises
    it for line 1.
    """
    lines = read_strict_lines(path, "SR file has no rows")
    rows = []
    for line_number, line in lines:
        fields = line.split("\t")
        if len(fields) != 5:
            message = f"expected 5 tab-separated fields, found {len(fields)}"
            raise DataFormatError(path, line_number, message, reason="field_count")
        try:
            row = SrRow(
                id=_parse_id(fields[0], "id"),
                sentence=fields[1],
                intent=fields[2],
                positive_ids=_parse_ids(fields[3], "positive_ids"),
                negative_ids=_parse_ids(fields[4], "negative_ids"),
            )
        except ValueError as e:
            raise DataFormatError(path, line_number, str(e), reason="bad_id") from None
        problem = _row_problem(row, line_number - 1, len(lines))
        if problem is not None:
            raise DataFormatError(path, line_number, problem[1], reason=problem[0])
        rows.append(row)
    return rows


def _is_plain_int(text: str) -> bool:
    # Stricter than int(): no signs, spaces, underscores or non-ASCII digits.
    return text.isascii() and text.isdigit()


def _parse_id(text: str, name: str) -> int:
    if not _is_plain_int(text):
        raise ValueError(f"{name}: {text!r} is not a non-negative decimal integer")
    return int(text)


def _parse_ids(text: str, name: str) -> tuple[int, ...]:
    if not text:
        return ()
    parts = text.split(",")
    bad = next((part for part in parts if not _is_plain_int(part)), None)
    if bad is not None:
        raise ValueError(f"{name}: {bad!r} is not a non-negative decimal integer")
    return tuple(map(int, parts))
