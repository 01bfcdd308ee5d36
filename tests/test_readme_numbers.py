"""Every hand-written table of README.md, docs/ and benchmarks/README.md is declared here with the
committed file (or the paper) its numbers come from, and each of its rows must be found there.
Tables that copy a results file sit between `<!-- table: ... -->` markers instead: `dialoguecse-
experiment docs` writes them and tests/test_doc_tables.py checks them.

The hand-written tables are pasted by hand, so a rerun that changes a results file (or a slip while pasting)
would otherwise leave the docs quoting numbers no committed file holds. A table nobody declared
fails, a declared table that no longer exists fails, and a row whose label cannot be found in
its source fails unless the declaration names it as unsourced, with the reason.

What is compared: the decimal numbers of a row (e.g. "52.49 ± 0.47" gives 52.49 and 0.47), in
order, must be a subsequence of the source row's (Markdown sources, matched by row label), or
each must be a number of the source file at the printed precision (JSON measurements), or each
must appear in the paper's text (transcribed paper numbers). Integers (counts, step numbers) are
not compared.
"""

import dataclasses
import json
import re

import pytest

from conftest import REPO_ROOT

PAPERS = REPO_ROOT.parent / "shared" / "papers"
DOCS = ("README.md", "docs/usage.md", "docs/benchmark.md", "docs/results_ecd.md", "docs/english_track.md", "docs/dse.md",
        "docs/dial2vec.md", "docs/demo.md", "docs/reliability.md", "benchmarks/README.md")
DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.])")
STUDY = "DialogueCSE_I2 / {} (1 seed)"


@dataclasses.dataclass(frozen=True)
class Table:
    doc: str
    heading: str
    ordinal: int  # 0-based, among the tables under the same heading
    line: int
    header: tuple
    rows: tuple  # of cell tuples
    generated: bool = False  # between table markers: written from a results file


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a table's numbers come from.

    kind: "results" (Markdown tables under results/: rows matched by label), "measurements"
    (JSON files: each number found at the printed precision), "paper" (each number in the paper's
    text: `paper` names the file, or maps a row-label prefix to a file), "text" (no number to
    source: the table may hold no decimal number at all), "tests" (numbers are the tolerances
    and observations of the tests the table names; `why` says so).
    """

    kind: str
    files: tuple = ()
    labels: dict = dataclasses.field(default_factory=dict)  # README label -> source label
    template: str = "{}"  # how an unmapped README label reads in the source
    skip_columns: tuple = ()  # headers of text or derived columns
    any_order: bool = False  # the doc orders the source's columns differently
    unsourced_rows: dict = dataclasses.field(default_factory=dict)  # label -> why it has no source
    paper: object = None
    why: str = ""


def _results(*files, **kwargs):
    return Source("results", files, **kwargs)


HEADLINE = "## Headline: three methods on one benchmark"
ECD_MAIN = "### The main table: 3 seeds for the paper's key comparison"
STUDY_COLUMNS = ("What it changes", "Whose reading", "vs 67.61")
PAPER_TABLE_ROWS = {"DialogueCSE": "dialoguecse_emnlp2021.txt", "DSE": "dse_naacl2022.txt",
                    "dial2vec": "dial2vec_emnlp2022.md"}

# (document, heading, ordinal) -> Source
DECLARED = {
    ("README.md", HEADLINE, 2): Source("paper", paper=PAPER_TABLE_ROWS),
    ("README.md", "## Layout", 0): Source("text"),
    ("README.md", "## Against the releases and sentence-transformers", 0): Source("text"),
    ("README.md", "## Documentation", 0): Source("text"),
    ("docs/results_ecd.md", ECD_MAIN, 1): Source("paper", paper="dialoguecse_emnlp2021.txt"),
    ("docs/english_track.md", "### Why DialogueCSE does not pull ahead here: the study on the English track", 0): _results(
        "results/sgd_minilm/study/table.md", template=STUDY, skip_columns=STUDY_COLUMNS,
        labels={"SiameseBERT_M, no MLM": "SiameseBERT_M / no MLM (1 seed)"}),
    ("docs/english_track.md", "### The same study on ECD", 0): _results(
        "results/ecd_cpu/study/table.md", template=STUDY, skip_columns=STUDY_COLUMNS,
        labels={"DialogueCSE_I2, main run (3 seeds)": "DialogueCSE_I2 (3 seeds)",
                "SiameseBERT_M, main run (3 seeds)": "SiameseBERT_M (3 seeds)"}),
    ("docs/dse.md", "### DSE on the English track: results", 0): _results(
        "results/dse_sgd_minilm/table.md", labels={"MiniLM (untouched)": "MiniLM"}, any_order=True),
    ("docs/reliability.md", "# Reliability: what was tried and what held", 0): Source(
        "tests", why="each row names the test whose assertions and tolerances it states"),
    ("docs/reliability.md", "## A new user's first runs (the 2026-11 probes)", 0): Source(
        "measurements", ("benchmarks/results/new_user_probes.json", "benchmarks/results/new_user_probes_before.json",
                         "benchmarks/results/new_user_probes_before_huge.json")),
    ("benchmarks/README.md", "# Benchmarks", 0): Source("text"),
    ("benchmarks/README.md", "### 1. Encoding throughput (512 demo-corpus sentences, batch 64, max length 128, "
     "5 repeats)", 0): Source("measurements", ("benchmarks/results/encode_throughput.json",),
                              skip_columns=("vs PyTorch peer",)),
    ("benchmarks/README.md", "### 2. Contrastive training step (batch 20, 3 turns, 10 candidates, L=50: 260 "
     "sequences/step; MiniLM, bottom 3 of 6 layers frozen; 5 x 3 steps)", 0): Source(
        "measurements", ("benchmarks/results/train_step_synthetic.json", "benchmarks/results/train_step_ecd.json"),
        skip_columns=("vs peer",)),
    # ms per sequence and per 1k tokens are s/step divided by the preceding column.
    ("benchmarks/README.md", "### 3. Scaling", 0): Source("measurements", ("benchmarks/results/scaling.json",),
                                                         skip_columns=("ms/sequence",)),
    ("benchmarks/README.md", "### 3. Scaling", 1): Source("measurements", ("benchmarks/results/scaling.json",),
                                                         skip_columns=("ms/sequence",)),
    ("benchmarks/README.md", "### 3. Scaling", 2): Source("measurements", ("benchmarks/results/scaling.json",),
                                                         skip_columns=("ms per 1k tokens",)),
    ("benchmarks/README.md", "### 4. Hardware utilisation (forward pass, batch 64 x 128 tokens, all real tokens; "
     "5 repeats)", 0): Source("measurements", ("benchmarks/results/flops.json",)),
    ("benchmarks/README.md", "### 6. DSE training step (MiniLM, 64 synthetic pairs of at most 32 tokens, mean "
     "20.3; every layer trained; 5 x 3 steps)", 0): Source("measurements", ("benchmarks/results/dse_step.json",)),
    ("benchmarks/README.md", "### 7. dial2vec training step (MiniLM, 4 dialogues x 5 sequences, window 10, bottom "
     "3 of 6 layers frozen; 3 x 2 steps)", 0): Source("measurements", ("benchmarks/results/dial2vec_step.json",)),
    ("benchmarks/README.md", "### 8. Every objective against PyTorch", 0): Source(
        "measurements", ("benchmarks/results/objective_steps.json",)),
    ("benchmarks/README.md", "### 9. Record building (a million demo dialogues; single process against Apache "
     "Beam)", 0): Source("measurements", ("benchmarks/results/record_building.json",)),
    ("benchmarks/README.md", "### 9. Record building (a million demo dialogues; single process against Apache "
     "Beam)", 1): Source("measurements", ("benchmarks/results/record_building.json",)),
    ("benchmarks/README.md", "## The papers' model shape", 0): Source(
        "measurements", ("benchmarks/results/paper_shape.json",)),
    ("benchmarks/README.md", "## What the fast path is, and its flags", 0): Source(
        "tests", why="the effects are the benchmarks above and the equality tests named in each row"),
}


def _cells(line):
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def read_tables(doc) -> list:
    """Every Markdown table of `doc` (a header line followed by a separator line)."""
    lines = (REPO_ROOT / doc).read_text(encoding="utf-8").splitlines()
    tables, heading, counts, index, fenced, generated = [], "", {}, 0, False, False
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("<!-- table: "):
            generated = True
        elif not fenced and line == "<!-- /table -->":
            generated = False
        elif not fenced and re.match(r"^#{1,6} ", line):
            heading = line.strip()
        if (not fenced and line.startswith("|") and index + 1 < len(lines)
                and re.match(r"^\|\s*:?-", lines[index + 1])):
            end = index + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            ordinal = counts.get(heading, 0)
            counts[heading] = ordinal + 1
            tables.append(Table(doc, heading, ordinal, index + 1, _cells(line),
                                tuple(_cells(row) for row in lines[index + 2:end]), generated))
            index = end
            continue
        index += 1
    return tables


def _decimals(cells) -> list:
    return [match for cell in cells for match in DECIMAL.findall(cell.replace("**", ""))]


def _is_subsequence(part, whole) -> bool:
    remaining = iter(whole)
    return all(any(item == candidate for candidate in remaining) for item in part)


def _is_submultiset(part, whole) -> bool:
    remaining = list(whole)
    for item in part:
        if item not in remaining:
            return False
        remaining.remove(item)
    return True


def _json_numbers(value):
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _json_numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_numbers(item)


def _printed_as(number: float, text: str) -> bool:
    """Whether `number` prints as `text`, as it is or in the units the docs use: a fraction as a
    percentage, FLOP as GFLOP, MiB as GiB."""
    decimals = len(text.split(".")[1])
    target = float(text)
    return any(abs(round(scaled, decimals) - target) < 1e-9
               for scaled in (number, 100 * number, number / 1e9, number / 1024))


def _kept_cells(table, source, row):
    skipped = {i for i, header in enumerate(table.header) if header in source.skip_columns}
    return [cell for i, cell in enumerate(row) if i >= 1 and i not in skipped]


def _source_rows(source) -> dict:
    rows = {}
    for path in source.files:
        for table in read_tables(path):
            for row in table.rows:
                rows[row[0]] = row[1:]
    return rows


def _check(table, source) -> list:
    """Problems of `table` against `source`, one line each."""
    where = f"{table.doc}:{table.line}"
    problems = []
    if source.kind == "text":
        problems += [f"{where}: row {row[0]!r} holds decimal numbers but the table is declared text-only"
                     for row in table.rows if _decimals(row[1:])]
    elif source.kind == "results":
        rows = _source_rows(source)
        for row in table.rows:
            label = row[0]
            if label in source.unsourced_rows:
                continue
            wanted = label if label in rows else source.labels.get(label, source.template.format(label))
            if wanted not in rows:
                problems.append(f"{where}: row {label!r} is not a row of {', '.join(source.files)}")
                continue
            numbers = _decimals(_kept_cells(table, source, row))
            found = (_is_submultiset(numbers, _decimals(rows[wanted])) if source.any_order
                     else _is_subsequence(numbers, _decimals(rows[wanted])))
            if not found:
                problems.append(f"{where}: row {label!r} {numbers} is not in {source.files[0]}'s row "
                                f"{wanted!r} {_decimals(rows[wanted])}")
    elif source.kind == "measurements":
        measured = [n for path in source.files
                    for n in _json_numbers(json.loads((REPO_ROOT / path).read_text(encoding="utf-8")))]
        for row in table.rows:
            for text in _decimals(_kept_cells(table, source, row)):
                if not any(_printed_as(n, text) for n in measured):
                    problems.append(f"{where}: row {row[0]!r}: {text} is in none of {list(source.files)}")
    elif source.kind == "paper":
        for row in table.rows:
            name = source.paper if isinstance(source.paper, str) else next(
                (f for prefix, f in source.paper.items() if row[0].startswith(prefix)), None)
            if name is None:
                problems.append(f"{where}: row {row[0]!r} names no paper")
                continue
            text = (PAPERS / name).read_text(encoding="utf-8")
            problems += [f"{where}: row {row[0]!r}: {number} is not in {name}" for number in _decimals(row[1:])
                         if not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", text)]
    elif source.kind != "tests" or not source.why:
        problems.append(f"{where}: bad declaration {source}")
    return problems


def _all_tables():
    return [table for doc in DOCS for table in read_tables(doc)]


def test_every_table_is_declared_and_every_declaration_is_a_table():
    found = {(t.doc, t.heading, t.ordinal): t for t in _all_tables() if not t.generated}
    undeclared = [f"{t.doc}:{t.line} ({t.heading!r}, table {t.ordinal})" for key, t in found.items()
                  if key not in DECLARED]
    assert not undeclared, f"tables without a declared source: {undeclared}"
    assert not set(DECLARED) - set(found), f"declared tables not found: {sorted(set(DECLARED) - set(found))}"


@pytest.mark.parametrize("key", sorted(DECLARED), ids=lambda key: f"{key[0]}:{key[1][:40]}:{key[2]}")
def test_table_numbers_are_in_their_source(key, shared_data):
    tables = {(t.doc, t.heading, t.ordinal): t for t in _all_tables()}
    if key not in tables:
        pytest.fail(f"declared table {key} not found")
    problems = _check(tables[key], DECLARED[key])
    assert not problems, "\n".join(problems)


def test_the_check_fails_on_a_changed_cell_an_unknown_row_and_a_foreign_number(tmp_path, monkeypatch):
    source_doc = tmp_path / "source.md"
    source_doc.write_text("| Model | A | B |\n|:--|--:|--:|\n| M (3 seeds) | 52.49 ± 0.47 | **71.71** |\n",
                          encoding="utf-8")
    monkeypatch.setattr("test_readme_numbers.REPO_ROOT", tmp_path)
    source = _results("source.md", labels={"M, main": "M (3 seeds)"})
    table = Table("x.md", "# x", 0, 1, ("Model", "A", "B"), (("M, main", "52.49 ± 0.47", "71.71"),))
    assert _check(table, source) == []
    changed = dataclasses.replace(table, rows=(("M, main", "52.49 ± 0.46", "71.71"),))
    assert "is not in" in _check(changed, source)[0]
    unknown = dataclasses.replace(table, rows=(("N", "52.49", "71.71"),))
    assert "is not a row of" in _check(unknown, source)[0]
    assert _check(dataclasses.replace(table, rows=(("N", "1.5"),)), Source("text"))
    assert _printed_as(0.7165, "71.65") and not _printed_as(0.7165, "71.66")
