"""Docs tables generated from the committed results files (`dialoguecse-experiment docs`).

A table in README.md, docs/*.md or benchmarks/README.md that shows a results file's numbers
sits between two markers, and `update_docs` rewrites it from that file:

    <!-- table: results/ecd_cpu/table.md -->
    | Model | ECD Corr. | ... |
    <!-- /table -->

The block holds the first Markdown table of the file, or a part of it chosen by options after
the path: `columns=1,3-5` (the source's columns, counted from 1), `rows=2-7` (its data rows,
counted from 1), `headers="Model|SR MAP|..."` (the kept columns' headers as the doc prints
them) and `rename="old row label=new row label;..."`. A doc table that is not such a copy
(its own columns, merged cells, other bold) stays hand-written; tests/repository/test_readme_numbers.py
checks those against their sources.

This module reads text only (no TensorFlow), so the check runs anywhere.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shlex

DOC_PATTERNS = ("README.md", "docs/*.md", "benchmarks/README.md")
START = re.compile(r"^<!-- table: (?P<spec>.+?) -->$")
END = "<!-- /table -->"
OPTIONS = ("columns", "rows", "headers", "rename")


@dataclasses.dataclass(frozen=True)
class Block:
    """One generated table of a doc: where it is, what it shows and what it should hold."""

    doc: str
    line: int  # 1-based line of the start marker
    source: str  # the results file, relative to the repository
    current: tuple  # the lines between the markers now
    expected: tuple  # the lines the source gives

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line} ({self.source})"


def doc_paths(repo_root: str) -> list[str]:
    """The docs that may hold generated tables, relative to the repository."""
    paths = []
    for pattern in DOC_PATTERNS:
        paths.extend(sorted(glob.glob(os.path.join(repo_root, pattern))))
    return [os.path.relpath(path, repo_root) for path in paths]


def first_table(lines: list[str]) -> list[str]:
    """The first Markdown table (header, separator, rows) among `lines`; [] when there is none."""
    for index in range(len(lines) - 1):
        if lines[index].startswith("|") and re.match(r"^\|\s*:?-", lines[index + 1]):
            end = index + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            return lines[index:end]
    return []


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _row(values: list[str]) -> str:
    return "| " + " | ".join(values) + " |"


def _separator(values: list[str]) -> str:
    return "|" + "|".join(values) + "|"


def _indexes(text: str, count: int, what: str) -> list[int]:
    """`1,3-5` -> [0, 2, 3, 4], each within 1..count."""
    indexes = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        if not first.strip().isdigit() or (last and not last.strip().isdigit()):
            raise ValueError(f"{what} takes numbers and ranges such as 1,3-5, got {text!r}")
        low, high = int(first), int(last or first)
        if not 1 <= low <= high <= count:
            raise ValueError(f"{what} {part!r} is outside 1..{count}")
        indexes.extend(range(low - 1, high))
    return indexes


def parse_spec(spec: str) -> tuple[str, dict]:
    """`results/x.md columns=1,2 rows=1-3` -> ("results/x.md", {"columns": "1,2", "rows": "1-3"})."""
    try:
        words = shlex.split(spec)
    except ValueError as error:
        raise ValueError(f"cannot read the table options {spec!r}: {error}") from None
    if not words:
        raise ValueError("a table marker names no results file")
    options = {}
    for word in words[1:]:
        name, sep, value = word.partition("=")
        if not sep or name not in OPTIONS:
            raise ValueError(f"unknown table option {word!r}; options: {', '.join(OPTIONS)}")
        options[name] = value
    return words[0], options


def render(source: str, options: dict, repo_root: str) -> list[str]:
    """The table lines that `source` (a results .md file) gives under `options`."""
    path = os.path.join(repo_root, source)
    if not os.path.isfile(path):
        raise ValueError(f"results file {source} does not exist")
    with open(path, encoding="utf-8") as f:
        table = first_table(f.read().splitlines())
    if not table:
        raise ValueError(f"results file {source} holds no Markdown table")
    header, separator, rows = cells(table[0]), cells(table[1]), [cells(line) for line in table[2:]]
    columns = _indexes(options["columns"], len(header), "columns") if "columns" in options else range(len(header))
    if "rows" in options:
        rows = [rows[i] for i in _indexes(options["rows"], len(rows), "rows")]
    renames = {}
    for pair in filter(None, options.get("rename", "").split(";")):
        old, sep, new = pair.partition("=")
        if not sep:
            raise ValueError(f"rename takes 'old label=new label;...', got {pair!r}")
        renames[old.strip()] = new.strip()
    missing = sorted(set(renames) - {row[0] for row in rows})
    if missing:
        raise ValueError(f"rename names rows {missing} that {source} does not have")
    rows = [[renames.get(row[0], row[0])] + row[1:] for row in rows]
    headers = [header[i] for i in columns]
    if "headers" in options:
        headers = [cell.strip() for cell in options["headers"].split("|")]
        if len(headers) != len(columns):
            raise ValueError(f"headers gives {len(headers)} names for {len(columns)} columns")
    return ([_row(headers), _separator([separator[i] for i in columns])]
            + [_row([row[i] for i in columns]) for row in rows])


def find_blocks(doc: str, repo_root: str) -> list[Block]:
    """Every generated table of `doc`, with the lines its source gives."""
    with open(os.path.join(repo_root, doc), encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = START.match(lines[index])
        if not match:
            if lines[index] == END:
                raise ValueError(f"{doc}:{index + 1}: {END} without a table marker before it")
            index += 1
            continue
        try:
            end = lines.index(END, index + 1)
        except ValueError:
            raise ValueError(f"{doc}:{index + 1}: table marker without {END}") from None
        if any(START.match(line) for line in lines[index + 1:end]):
            raise ValueError(f"{doc}:{index + 1}: table marker inside another table's block")
        try:
            source, options = parse_spec(match.group("spec"))
            expected = render(source, options, repo_root)
        except ValueError as error:
            raise ValueError(f"{doc}:{index + 1}: {error}") from None
        blocks.append(Block(doc, index + 1, source, tuple(lines[index + 1:end]), tuple(expected)))
        index = end + 1
    return blocks


def update_docs(repo_root: str, check: bool = False) -> list[Block]:
    """Rewrites every generated table that differs from its source (with `check`, only reports
    them); returns those blocks."""
    stale = []
    for doc in doc_paths(repo_root):
        blocks = [block for block in find_blocks(doc, repo_root) if block.current != block.expected]
        stale.extend(blocks)
        if blocks and not check:
            path = os.path.join(repo_root, doc)
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            # From the last block up, so earlier blocks' line numbers stay valid.
            for block in reversed(blocks):
                lines[block.line:block.line + len(block.current)] = list(block.expected)
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    return stale
