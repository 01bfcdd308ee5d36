"""Atomic file writes (a reader sees the old file or the complete new one, never a part) and JSON reading."""

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
