"""The docs tables generated from results files: `dialoguecse-experiment docs --check` passes on
the committed docs and results (every table matches its results file; every results folder is
what the current code makes, or kept in results/SUPERSEDED.md as made before a change) and
fails, naming the block, when a generated table is edited by hand."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, SHARED_DATA
from dialoguecse_tf.experiments.doc_tables import doc_paths, find_blocks, render, update_docs


def _check(repo_root):
    return subprocess.run([sys.executable, "-m", "dialoguecse_tf.cli.experiment", "docs", "--check",
                           f"--data_dir={SHARED_DATA}"],
                          cwd=repo_root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo_root)})


@pytest.mark.slow
def test_the_committed_docs_hold_their_generated_tables():
    blocks = [block for doc in doc_paths(str(REPO_ROOT)) for block in find_blocks(doc, str(REPO_ROOT))]
    assert len(blocks) >= 10, "the results tables of README and docs/ are generated blocks"
    done = _check(REPO_ROOT)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def docs_copy(tmp_path):
    """The docs, the results files and the code of the repository, in a folder of their own."""
    for name in ("README.md", "docs", "benchmarks/README.md", "results", "dialoguecse_tf", "experiments"):
        source, target = REPO_ROOT / name, tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.png", "__pycache__"))
        else:
            shutil.copyfile(source, target)
    return tmp_path


@pytest.mark.slow
def test_an_edited_block_fails_the_check_naming_it_and_docs_rewrites_it(docs_copy):
    doc = docs_copy / "docs" / "results_ecd.md"
    text = doc.read_text(encoding="utf-8")
    # A cell of the ECD main table as its results file holds it, whatever a rerun made it.
    row = next(line for line in (docs_copy / "results" / "ecd_cpu" / "table.md").read_text().splitlines()
               if line.startswith("| DialogueCSE_I2 "))
    cell = f"| {row.split('|')[2].strip()} |"
    assert cell in text
    doc.write_text(text.replace(cell, "| 0.00 |", 1), encoding="utf-8")
    block = next(b for b in find_blocks("docs/results_ecd.md", str(docs_copy)) if b.current != b.expected)
    done = _check(docs_copy)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and f"docs/results_ecd.md:{block.line} (results/ecd_cpu/table.md)" in done.stderr
    # Rewritten to the committed text, which test_the_committed_docs_hold_their_generated_tables checks.
    assert [b.name for b in update_docs(str(docs_copy))] == [block.name]
    assert doc.read_text(encoding="utf-8") == text


def test_selectors_pick_columns_and_rows_rename_rows_and_headers(tmp_path):
    (tmp_path / "t.md").write_text("| Model | A | B | C |\n|:--|--:|--:|--:|\n| x | 1.00 | 2.00 | 3.00 |\n"
                                   "| y | 4.00 | 5.00 | 6.00 |\n\nnotes\n", encoding="utf-8")
    options = {"columns": "1,3-4", "rows": "2", "rename": "y=z", "headers": "Model|B2|C2"}
    assert render("t.md", options, str(tmp_path)) == ["| Model | B2 | C2 |", "|:--|--:|--:|", "| z | 5.00 | 6.00 |"]
    with pytest.raises(ValueError, match="outside 1..4"):
        render("t.md", {"columns": "1,5"}, str(tmp_path))
    with pytest.raises(ValueError, match="does not have"):
        render("t.md", {"rename": "w=v"}, str(tmp_path))
    (tmp_path / "README.md").write_text("<!-- table: t.md colums=1 -->\n<!-- /table -->\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"README.md:1: unknown table option 'colums=1'"):
        find_blocks("README.md", str(tmp_path))
    (tmp_path / "README.md").write_text("<!-- table: t.md -->\n| old |\n", encoding="utf-8")
    with pytest.raises(ValueError, match="without <!-- /table -->"):
        find_blocks("README.md", str(tmp_path))
