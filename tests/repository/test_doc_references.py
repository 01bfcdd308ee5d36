"""Every test file and test a document cites exists: a claim's evidence must be findable."""

import re

import pytest

from conftest import REPO_ROOT

DOCUMENTS = sorted({*REPO_ROOT.glob("*.md"), *(REPO_ROOT / "docs").glob("*.md"), REPO_ROOT / "benchmarks" / "README.md"})
# A cited test file, by its path under tests/ or its name alone, and optionally one of its tests.
CITATION = re.compile(r"(?<![\w/])(?:tests/)?((?:\w+/)*test_\w+\.py)(?:::(\w+))?")
TEST_FILES = {path.relative_to(REPO_ROOT / "tests").as_posix(): path for path in (REPO_ROOT / "tests").rglob("test_*.py")}


def _resolve(cited: str):
    """The test file a citation names: its path under tests/, or the one file of that name."""
    if cited in TEST_FILES:
        return TEST_FILES[cited]
    matches = [path for name, path in TEST_FILES.items() if name.split("/")[-1] == cited.split("/")[-1]]
    return matches[0] if len(matches) == 1 and "/" not in cited else None


def _citations():
    for document in DOCUMENTS:
        for line_number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            for match in CITATION.finditer(line):
                if line[match.end():].startswith(" (now "):
                    continue  # a record of its time, quoting an old name beside the new one
                yield f"{document.relative_to(REPO_ROOT)}:{line_number}", match.group(1), match.group(2)


def test_documents_cite_some_tests():
    assert len(list(_citations())) > 20


@pytest.mark.parametrize("document", [d.relative_to(REPO_ROOT).as_posix() for d in DOCUMENTS])
def test_every_cited_test_exists(document):
    missing = []
    for where, cited, function in _citations():
        if not where.startswith(document + ":"):
            continue
        path = _resolve(cited)
        if path is None:
            missing.append(f"{where}: {cited}")
        elif function and not re.search(rf"^\s*(?:async )?def {function}\(", path.read_text(encoding="utf-8"), re.M):
            missing.append(f"{where}: {cited}::{function}")
    assert not missing, "cited but not found:\n" + "\n".join(missing)
