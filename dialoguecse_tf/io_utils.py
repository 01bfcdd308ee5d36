"""Atomic file writes (a reader sees the old file or the complete new one, never a part), JSON reading
and strict line reading."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile


@contextlib.contextmanager
def atomic_open(path, mode: str = "w", **open_kwargs):
    """Opens a temporary file beside `path`; renames it into place only on success."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + "-", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            yield handle
        os.chmod(tmp_path, 0o644)  # mkstemp makes files private; outputs are for everyone to read
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise


def write_json(path, value, **dump_kwargs) -> None:
    with atomic_open(path, "w", encoding="utf-8") as writer:
        json.dump(value, writer, indent=2, ensure_ascii=False, **dump_kwargs)
        writer.write("\n")


def parse_json(data: bytes, source: str):
    """Decodes UTF-8 JSON; bad input raises ValueError naming `source`."""
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise ValueError(f"{source}: invalid UTF-8 at byte {error.start}") from None
    except RecursionError:
        raise ValueError(f"{source}: JSON nested too deeply") from None
    # JSONDecodeError, and the ValueError of an integer too long to convert.
    except ValueError as error:
        raise ValueError(f"{source}: not valid JSON ({error})") from None


def read_json(path):
    """`parse_json` of a local file's bytes."""
    with open(path, "rb") as reader:
        return parse_json(reader.read(), os.fspath(path))


def parse_json_object(data: bytes, source: str, what: str = "the file") -> dict:
    """Decodes UTF-8 JSON holding an object; anything else raises ValueError naming `source`."""
    value = parse_json(data, source)
    if not isinstance(value, dict):
        raise ValueError(f"{source}: {what} must be a JSON object, got {type(value).__name__}")
    return value


def read_json_object(path, what: str = "the file") -> dict:
    """`parse_json_object` of a local file's bytes."""
    with open(path, "rb") as reader:
        return parse_json_object(reader.read(), os.fspath(path), what)


def check_output_dir(path, flag: str = "output_dir") -> None:
    """Raises unless `path` is a folder, or can be made one, that this process may write in.

    For a stage to call before hours of work: the failure it would otherwise meet at its first
    write. Creates nothing.
    """
    path = os.path.abspath(os.fspath(path))
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        where = "" if existing == path else f": {existing}"
        raise NotADirectoryError(f"{flag} {path}{where} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == path else f": {existing}"
        raise PermissionError(f"{flag} {path}{where} is not writable")


class DataFormatError(ValueError):
    """A line of a text file (corpus, vocabulary, evaluation set) that does not follow its format.

    `reason` is a short stable key (e.g. "field_count") under which skipped lines are counted.
    """

    def __init__(self, path: str | os.PathLike, line_number: int, message: str, reason: str = "malformed"):
        super().__init__(str(path), line_number, message)
        self.path = str(path)
        self.line_number = line_number
        self.message = message
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}:{self.line_number}: {self.message}"

    # The default pickling re-calls __init__ with self.args only, which would lose `reason`;
    # errors must survive being sent back from worker processes.
    def __reduce__(self):
        return (type(self), (self.path, self.line_number, self.message, self.reason))


def read_utf8(path) -> str:
    """The whole text of a UTF-8 file, a leading byte-order mark dropped.

    Args:
      path: the file.

    Returns:
      Its text. A byte that is not UTF-8 raises `DataFormatError` (reason "invalid_utf8") at the
      line holding it.
    """
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(path, raw.count(b"\n", 0, e.start) + 1, f"invalid UTF-8 ({e.reason} at byte {e.start})",
                              reason="invalid_utf8") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_strict_lines(path, empty_message: str) -> list:
    """(1-based line number, text) of every line of a UTF-8 file, for formats with no blanks.

    A line ends at "\\n", "\\r\\n" or a lone "\\r", as the corpus readers split them; a leading
    byte-order mark is dropped; invalid UTF-8 or an empty file raises `DataFormatError` naming the
    file and line.
    """
    with open(path, "rb") as f:
        raw_lines = f.read().splitlines()
    if not raw_lines:
        raise DataFormatError(path, 1, empty_message, reason="empty_file")
    lines = []
    for line_number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataFormatError(
                path, line_number, f"invalid UTF-8 ({e.reason} at byte {e.start})", reason="invalid_utf8"
            ) from None
        if line_number == 1 and line.startswith("\ufeff"):
            line = line[1:]
        lines.append((line_number, line))
    return lines
