"""Where evaluation inputs and results come from: the repository-relative paths, checksums, commit
and time that results files record.

Apart from `results`, so that the evaluation tasks can describe their files without importing the
results module, which reads the task registry.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git_commit() -> str | None:
    """HEAD commit of the git checkout holding this package; None without git or a checkout."""
    try:
        completed = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = completed.stdout.strip()
    return commit if re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def file_sha256(path: str) -> str:
    """The file's SHA-256; for a folder (an intent set's train.json and test.json), that of its
    files' names and contents in name order."""
    digest = hashlib.sha256()
    files = [path]
    if os.path.isdir(path):
        files = [os.path.join(path, name) for name in sorted(os.listdir(path))
                 if os.path.isfile(os.path.join(path, name))]
    for file in files:
        if file != path:
            digest.update(os.path.basename(file).encode("utf-8") + b"\0")
        with open(file, "rb") as reader:
            for block in iter(lambda: reader.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def portable_path(path: str) -> str:
    """`path` relative to the repository root: no machine's absolute layout in results."""
    return os.path.relpath(os.path.abspath(path), REPO_ROOT)


def dataset_file_record(task: str, count_key: str, path: str, count: int) -> dict:
    """One task's entry in a results.json dataset record."""
    return {f"{task}_file": portable_path(path), f"{task}_sha256": file_sha256(path), count_key: count}


def portable_values(value):
    """`value` with every absolute path in it made relative to the repository."""
    if isinstance(value, dict):
        return {key: portable_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable_values(item) for item in value]
    if isinstance(value, str) and os.path.isabs(value):
        return portable_path(value)
    return value
