"""README's headline and demo tables must be copies of the committed results they cite.

The tables are pasted by hand, so a rerun that changes results.md (or a slip while pasting) would
otherwise leave README quoting numbers no committed file holds.
"""
import re

import pytest

from conftest import REPO_ROOT

# README section -> the committed table its rows are taken from.
SOURCES = {
    "Headline: three methods on one benchmark": "results/benchmark/results.md",
    "Quick start": "results/demo/results_table.md",
}


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_rows(lines):
    """Rows of every Markdown table in `lines`, header and separator lines dropped."""
    rows, previous = [], ""
    for line in lines:
        if previous.startswith("|") and line.startswith("|") and not re.match(r"^\|\s*:?-", line):
            rows.append(_cells(line))
        previous = line
    return rows


def _section(text, title):
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, f"README has no section '## {title}'"
    return match.group(1).splitlines()


def _is_slice(part, whole):
    return any(whole[i:i + len(part)] == part for i in range(len(whole) - len(part) + 1))


@pytest.mark.parametrize("section", sorted(SOURCES))
def test_readme_table_rows_are_slices_of_the_committed_table(section):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    source = {row[0]: row[1:] for row in _table_rows(
        (REPO_ROOT / SOURCES[section]).read_text(encoding="utf-8").splitlines())}
    quoted = set()
    for row in _table_rows(_section(readme, section)):
        if row[0] not in source:
            continue
        assert _is_slice(row[1:], source[row[0]]), (
            f"README '{section}' row {row[0]!r} is not a run of columns of {SOURCES[section]}: "
            f"{row[1:]} vs {source[row[0]]}")
        quoted.add(row[0])
    assert quoted == set(source), (
        f"README '{section}' does not quote {sorted(set(source) - quoted)} of {SOURCES[section]}")


def test_is_slice_rejects_a_changed_cell():
    whole = ["–", "56.11", "76.54", "**71.71**"]
    assert _is_slice(["76.54", "**71.71**"], whole)
    assert not _is_slice(["76.54", "71.71"], whole)
    assert not _is_slice(["56.11", "**71.71**"], whole)
