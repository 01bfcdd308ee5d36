"""Committed results name files relative to the repository or to ../shared, never by a path of
the machine that made them: a reader's clone lives elsewhere, and such a path tells nothing."""

import re

from conftest import REPO_ROOT

MACHINE_PATH = re.compile(r"(?<![\w$.-])/(tmp|work|home|root|Users|mnt|scratch)/")
TEXT_SUFFIXES = {".json", ".jsonl", ".md", ".txt", ".tsv", ".csv", ".yaml"}


def test_committed_results_hold_no_absolute_machine_path():
    found = []
    for folder in ("results", "benchmarks/results"):
        for path in sorted((REPO_ROOT / folder).rglob("*")):
            if path.suffix in TEXT_SUFFIXES and path.is_file():
                for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                    if MACHINE_PATH.search(line):
                        found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "\n".join(found)
