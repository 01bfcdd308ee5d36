"""Response-selection sets as DSE's release reads them, and their stand-ins built from a dialogue corpus.

DSE (Zhou et al., NAACL 2022, section 4.2 and Table 4) scores 0-shot response selection at two
levels; its release (amazon-research/dse) reads one file per level, written by
`data/process_evaluate.py` and read by `evaluate/run_similarity.py --TASK rs_amazon / rs_ubuntu`
(`evaluate/scripts/sim.sh`). Both are tab-separated files in Python's `csv` "excel" dialect
(`csv.writer(f, delimiter="\\t")` writes them and `csv.reader(f, delimiter="\\t")` reads them,
so a field holding a tab, a quote or a line break is quoted and its quotes doubled), one record
per line, no header:

* **utterance level**, `rs/amazonqa/test.txt` (AmazonQA): `query \\t response`, the question and
  its answer (process_evaluate.py:203-220: ParlAI's dump of AmazonQA, "text:" and "labels:"
  cut off). The evaluator scores consecutive blocks of 100 rows: each query against its own
  response and the other 99 rows' responses (run_similarity.py:131-134); rows after the last
  full block are not scored.
* **dialogue level**, `rs/ubuntu/test.txt` (DSTC7-Ubuntu, subtask 1): `context \\t response \\t
  candidates`, the dialogue so far, its true next turn and exactly 100 candidates joined by "|"
  (process_evaluate.py:223-240). ParlAI's DSTC7 teacher (parlai/tasks/dstc7/agents.py) writes
  the context as "<speaker>: <utterance>\\n" per message, speakers "participant 1" and
  "participant 2", and its candidates are DSTC7's 100 options, which hold the true response
  once, shuffled; process_evaluate.py turns ParlAI's escaped line breaks into spaces. The
  evaluator embeds the response followed by the 100 candidates, 101 texts a row
  (run_similarity.py:161-177), so the true response is there twice: as text 0 and as its copy
  among the candidates.

The release replaces every blank text by "." before embedding it (run_similarity.py:17-21,
121-122, 167-168); the readers here do the same and count them. Where the release would fail or
score silently wrong rows, the readers raise `DataFormatError` naming the file and line: a
record with another number of fields, a dialogue row with other than 100 candidates (the
release reshapes all rows at once, so a wrong count fails it or shifts every later row), an
utterance file of fewer than 100 rows (the release divides by its number of blocks, 0), an
empty file or one that is not UTF-8.

**Stand-ins built from a corpus** (AmazonQA and DSTC7-Ubuntu cannot be obtained here; the
project builds both shapes from SGD dev, `prep.run_build_rs_sets`), with Python's `random`
seeded once per set:

* utterance level (`build_utterance_rs_rows`): every turn of the responding speaker (SGD's
  SYSTEM) with the turn before it by another speaker is a (query, response) pair. The pairs
  are shuffled, then a pair is kept only when neither its query nor its response text is
  already kept: a response repeated within a block would tie exactly with the true one, and
  the release's order of tied scores (NumPy's unstable sort) would decide the hit; a repeated
  query would be asked for two answers. The rows are cut to whole blocks of 100, so every
  row is scored; a query's 99 competitors are its block's other responses, as in the release.
* dialogue level (`build_dialogue_rs_rows`): one row per dialogue, at a turn of the responding
  speaker drawn among those with at least `min_context_turns` turns before them; the context
  is every turn before it, written as the release reads ParlAI's DSTC7 text back
  (`context_text`: "participant 1: ... participant 2: ... ", the responding speaker
  participant 2, as the speaker whose turn DSTC7 asks for; each line break a space). The 100
  candidates are the true response and 99 responding-speaker turns drawn from the other
  dialogues, all of distinct texts, none of them a text of the row's own dialogue (so none is
  the true response or a turn of its context), in random order: DSTC7's shape, the true
  response once among them. A response holding "|" cannot be a candidate of this format and
  is neither a target nor drawn (counted). A CPU cut (`max_dialogues`) builds the set from a
  seeded sample of the dialogues instead, rows and candidates alike.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import random
from collections.abc import Sequence

from dialoguecse_tf.data.dialogue import Dialogue
from dialoguecse_tf.io_utils import DataFormatError, atomic_open, read_utf8

PathLike = str | os.PathLike

# run_similarity.py:131-134: the utterance-level queries are scored in blocks of 100 rows.
BLOCK_SIZE = 100
# run_similarity.py:177 reshapes the response and the candidates to [rows, 101, D].
NUM_CANDIDATES = 100
BLANK_FILL = "."  # run_similarity.py:17-21
CANDIDATE_SEPARATOR = "|"
# ParlAI's DSTC7 speakers, "participant_1" and "participant_2" with "_" made a space
# (dstc7/agents.py); the second is the one whose next turn is selected.
PARTICIPANTS = ("participant 1", "participant 2")


@dataclasses.dataclass(frozen=True)
class UtteranceRsSet:
    """An utterance-level set: row i is `queries[i]` and its true `responses[i]` (blank texts
    already replaced by "."), `blank_texts` of them blank in the file."""

    queries: tuple[str, ...]
    responses: tuple[str, ...]
    blank_texts: int = 0

    @property
    def scored_rows(self) -> int:
        """Rows in whole blocks of `BLOCK_SIZE`, the rows the release scores."""
        return len(self.queries) // BLOCK_SIZE * BLOCK_SIZE


@dataclasses.dataclass(frozen=True)
class DialogueRsSet:
    """A dialogue-level set: row i is `contexts[i]`, its true `responses[i]` and its
    `NUM_CANDIDATES` `candidates[i]` (blank texts replaced by "."); `responses_among_candidates`
    counts the rows whose candidates hold their true response's text (every row of DSTC7)."""

    contexts: tuple[str, ...]
    responses: tuple[str, ...]
    candidates: tuple[tuple[str, ...], ...]
    blank_texts: int = 0

    @property
    def responses_among_candidates(self) -> int:
        return sum(1 for response, row in zip(self.responses, self.candidates) if response in row)


def _records(path: PathLike, num_fields: int, names: str):
    """(first line number, fields) of every record of a release file, split as the release's
    `csv.reader(f, delimiter="\\t")` splits it; a record with another number of fields, text
    that is not UTF-8 or an empty file raises `DataFormatError` at its line."""
    reader = csv.reader(io.StringIO(read_utf8(path), newline=""), delimiter="\t")
    records = []
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise DataFormatError(path, start, f"not a tab-separated record: {error}", reason="csv") from None
        if len(fields) != num_fields:
            raise DataFormatError(path, start, f"expected {num_fields} tab-separated fields ({names}), found "
                                  f"{len(fields)}", reason="field_count")
        records.append((start, fields))
    if not records:
        raise DataFormatError(path, 1, "the file has no rows", reason="empty_file")
    return records


def _filled(texts: list) -> tuple[tuple, int]:
    """`texts` with each blank one replaced by ".", as the release's fill_empty_sentence, and how many."""
    blank = sum(1 for text in texts if not text.strip())
    return tuple(BLANK_FILL if not text.strip() else text for text in texts), blank


def read_utterance_rs_file(path: PathLike) -> UtteranceRsSet:
    """Reads an utterance-level file (`rs/amazonqa/test.txt` or `write_utterance_rs_file`'s).

    Args:
      path: the file; see the module docstring for its shape.

    Returns:
      UtteranceRsSet of its N rows, blank texts replaced by ".".

    Raises:
      DataFormatError: naming the file and line, for a record of other than 2 fields, text that
        is not UTF-8, an empty file, or fewer than 100 rows (line 1).
    """
    records = _records(path, 2, "query, response")
    if len(records) < BLOCK_SIZE:
        raise DataFormatError(path, 1, f"{len(records)} rows, fewer than one block of {BLOCK_SIZE}: the release "
                              f"scores whole blocks only", reason="too_few_rows")
    queries, blank_queries = _filled([fields[0] for _, fields in records])
    responses, blank_responses = _filled([fields[1] for _, fields in records])
    return UtteranceRsSet(queries, responses, blank_queries + blank_responses)


def read_dialogue_rs_file(path: PathLike) -> DialogueRsSet:
    """Reads a dialogue-level file (`rs/ubuntu/test.txt` or `write_dialogue_rs_file`'s).

    Args:
      path: the file; see the module docstring for its shape.

    Returns:
      DialogueRsSet of its N rows, each with `NUM_CANDIDATES` candidates, blank texts replaced by ".".

    Raises:
      DataFormatError: naming the file and line, for a record of other than 3 fields or of
        other than 100 "|"-separated candidates, text that is not UTF-8, or an empty file.
    """
    records = _records(path, 3, "context, response, candidates")
    contexts, responses, candidates = [], [], []
    for line_number, (context, response, joined) in records:
        row = joined.split(CANDIDATE_SEPARATOR)
        if len(row) != NUM_CANDIDATES:
            raise DataFormatError(path, line_number, f"expected {NUM_CANDIDATES} candidates separated by "
                                  f"{CANDIDATE_SEPARATOR!r}, found {len(row)}", reason="candidate_count")
        contexts.append(context)
        responses.append(response)
        candidates.append(row)
    contexts, blank_contexts = _filled(contexts)
    responses, blank_responses = _filled(responses)
    filled = [_filled(row) for row in candidates]
    return DialogueRsSet(contexts, responses, tuple(row for row, _ in filled),
                         blank_contexts + blank_responses + sum(blank for _, blank in filled))


def _writer(f):
    return csv.writer(f, delimiter="\t", lineterminator="\n")


def write_utterance_rs_file(rows: Sequence[tuple[str, str]], path: PathLike) -> None:
    """Writes (query, response) rows as an utterance-level file, atomically.

    Args:
      rows: N (query, response) pairs.
      path: the file to write.
    """
    with atomic_open(path, "w", encoding="utf-8", newline="") as f:
        _writer(f).writerows(rows)


def write_dialogue_rs_file(rows: Sequence[tuple[str, str, Sequence[str]]], path: PathLike) -> None:
    """Writes (context, response, candidates) rows as a dialogue-level file, atomically.

    Args:
      rows: N rows, each with `NUM_CANDIDATES` candidates, none holding "|".

    Raises:
      ValueError: a row the reader would refuse (another number of candidates, a "|" in one).
    """
    for index, (_, _, candidates) in enumerate(rows):
        if len(candidates) != NUM_CANDIDATES or any(CANDIDATE_SEPARATOR in text for text in candidates):
            raise ValueError(f"row {index}: needs {NUM_CANDIDATES} candidates without {CANDIDATE_SEPARATOR!r}")
    with atomic_open(path, "w", encoding="utf-8", newline="") as f:
        _writer(f).writerows((context, response, CANDIDATE_SEPARATOR.join(candidates))
                             for context, response, candidates in rows)


def _one_line(text: str) -> str:
    # ParlAI writes a line break as "\n" escaped, which process_evaluate.py:234 makes a space.
    return text.replace("\n", " ")


def context_text(dialogue: Dialogue, end: int, response_speaker: str) -> str:
    """The turns before `end` as the release's dialogue-level file holds a context.

    Args:
      dialogue: the dialogue.
      end: index of the turn to select; the context is turns [0, end).
      response_speaker: the speaker written "participant 2" (every other one is "participant 1").

    Returns:
      "participant 1: <text> participant 2: <text> ... ", a space after each turn, as ParlAI's
      "<speaker>: <text>\\n" per turn reads once process_evaluate.py makes its line breaks spaces.
    """
    return "".join(f"{PARTICIPANTS[turn.speaker == response_speaker]}: {_one_line(turn.text)} "
                   for turn in dialogue.turns[:end])


def utterance_pairs(dialogues: Sequence[Dialogue], response_speaker: str) -> list[tuple[str, str]]:
    """(query, response) of every turn of `response_speaker` whose previous turn is another
    speaker's, in corpus order."""
    return [(previous.text, turn.text) for dialogue in dialogues
            for previous, turn in zip(dialogue.turns, dialogue.turns[1:])
            if turn.speaker == response_speaker and previous.speaker != response_speaker]


def build_utterance_rs_rows(dialogues: Sequence[Dialogue], seed: int, response_speaker: str,
                            max_blocks: int = 0) -> tuple[list[tuple[str, str]], dict]:
    """The utterance-level rows of a corpus (see the module docstring).

    Args:
      dialogues: the corpus, in order.
      seed: seeds the shuffle (`random.Random(seed)`).
      response_speaker: the speaker whose turns are the responses (SGD: "SYSTEM").
      max_blocks: keep at most this many blocks of 100 rows, 0 for every whole block. The
        pairs are shuffled first, so a cut keeps a seeded sample, and the rows it keeps are
        the first rows of the uncut set.

    Returns:
      (rows, stats): N = 100 * B (query, response) pairs, no query or response text twice;
      stats counts "pairs", "repeated_response" and "repeated_query" (pairs dropped, in that
      order of checks), "rows", "blocks", "left_over" (kept pairs after the last whole block)
      and "cut_blocks" (whole blocks left out by `max_blocks`).

    Raises:
      ValueError: fewer than 100 pairs are left, or `max_blocks` is negative.
    """
    if max_blocks < 0:
        raise ValueError(f"max_blocks must be 0 (every whole block) or positive, got {max_blocks}")
    pairs = utterance_pairs(dialogues, response_speaker)
    random.Random(seed).shuffle(pairs)
    stats = {"pairs": len(pairs), "repeated_response": 0, "repeated_query": 0}
    kept, queries, responses = [], set(), set()
    for query, response in pairs:
        if response in responses:
            stats["repeated_response"] += 1
        elif query in queries:
            stats["repeated_query"] += 1
        else:
            kept.append((query, response))
            queries.add(query)
            responses.add(response)
    whole_blocks = len(kept) // BLOCK_SIZE
    if not whole_blocks:
        raise ValueError(f"{len(kept)} distinct (query, {response_speaker} response) pairs, fewer than one block of "
                         f"{BLOCK_SIZE}")
    blocks = min(whole_blocks, max_blocks) if max_blocks else whole_blocks
    rows = kept[:blocks * BLOCK_SIZE]
    stats.update(rows=len(rows), blocks=blocks, left_over=len(kept) - whole_blocks * BLOCK_SIZE,
                 cut_blocks=whole_blocks - blocks)
    return rows, stats


def build_dialogue_rs_rows(dialogues: Sequence[Dialogue], seed: int, response_speaker: str,
                           min_context_turns: int, max_dialogues: int = 0
                           ) -> tuple[list[tuple[str, str, tuple[str, ...]]], dict]:
    """The dialogue-level rows of a corpus (see the module docstring).

    Args:
      dialogues: the corpus, in order; each gives at most one row, in this order.
      seed: seeds one `random.Random(seed)` drawing every row's turn, candidates and order.
      response_speaker: the speaker whose turns are selected and drawn (SGD: "SYSTEM").
      min_context_turns: fewest turns a context holds, >= 1.
      max_dialogues: build the set from a seeded sample of this many dialogues (drawn by a
        `random.Random(seed)` of its own, kept in corpus order), 0 from every dialogue. The
        sample gives both the rows and the turns their candidates are drawn from: the texts to
        embed shrink with it, the rows' candidates alone would not (a few hundred rows draw
        nearly every distinct response of a corpus).

    Returns:
      (rows, stats): (context, response, 100 candidates) rows; stats counts "dialogues" (the
      ones read, after the sample), "rows", "no_target" (dialogues without a turn to select),
      "separator_responses" (responses holding "|", never selected nor drawn),
      "mean_context_turns" and "cut_dialogues" (left out by `max_dialogues`).

    Raises:
      ValueError: `min_context_turns` below 1, `max_dialogues` negative, or too few distinct
        responses in the other dialogues to draw 99 candidates for a row.
    """
    if min_context_turns < 1:
        raise ValueError(f"min_context_turns must be at least 1, got {min_context_turns}")
    if max_dialogues < 0:
        raise ValueError(f"max_dialogues must be 0 (every dialogue) or positive, got {max_dialogues}")
    cut_dialogues = 0
    if 0 < max_dialogues < len(dialogues):
        chosen = sorted(random.Random(seed).sample(range(len(dialogues)), max_dialogues))
        cut_dialogues = len(dialogues) - max_dialogues
        dialogues = [dialogues[index] for index in chosen]
    # Every responding turn that may be drawn, as (dialogue index, text): drawing turns, not
    # distinct texts, keeps a frequent response as frequent among the candidates as in the corpus.
    pool = []
    separator_responses = 0
    for index, dialogue in enumerate(dialogues):
        for turn in dialogue.turns:
            if turn.speaker != response_speaker:
                continue
            if CANDIDATE_SEPARATOR in turn.text:
                separator_responses += 1
            else:
                pool.append((index, _one_line(turn.text)))
    pool_texts = {text for _, text in pool}
    rng = random.Random(seed)
    rows, context_turns, no_target = [], [], 0
    for index, dialogue in enumerate(dialogues):
        turns = dialogue.turns
        positions = [position for position in range(min_context_turns, len(turns))
                     if turns[position].speaker == response_speaker
                     and turns[position - 1].speaker != response_speaker
                     and CANDIDATE_SEPARATOR not in turns[position].text]
        if not positions:
            no_target += 1
            continue
        position = rng.choice(positions)
        response = _one_line(turns[position].text)
        own_texts = {_one_line(turn.text) for turn in turns}
        # A text not in this dialogue occurs only in others: these are the texts left to draw.
        if len(pool_texts) - len(own_texts & pool_texts) < NUM_CANDIDATES - 1:
            raise ValueError(f"dialogue {dialogue.dialogue_id}: the other dialogues hold fewer than "
                             f"{NUM_CANDIDATES - 1} distinct {response_speaker} responses to draw candidates from")
        drawn: list[str] = []
        seen = set(own_texts)
        while len(drawn) < NUM_CANDIDATES - 1:
            source, text = pool[rng.randrange(len(pool))]
            if source != index and text not in seen:
                seen.add(text)
                drawn.append(text)
        drawn.insert(rng.randrange(NUM_CANDIDATES), response)
        rows.append((context_text(dialogue, position, response_speaker), response, tuple(drawn)))
        context_turns.append(position)
    stats = {"dialogues": len(dialogues), "rows": len(rows), "no_target": no_target,
             "separator_responses": separator_responses,
             "mean_context_turns": sum(context_turns) / len(context_turns) if context_turns else 0.0,
             "cut_dialogues": cut_dialogues}
    return rows, stats
