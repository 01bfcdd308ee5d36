"""The logs a training run writes: TensorBoard events and `train_log.jsonl`, which a resumed
run extends."""

import json
import os

TENSORBOARD_DIR = "tensorboard"
# The logged scalars as JSON Lines, one {"step": n, ...} per logging step and per evaluation:
# TensorBoard's event files are not a format to commit or diff, this is.
TRAIN_LOG_FILE = "train_log.jsonl"


def open_logs(strategy, output_dir: str, start_step: int):
    """(TensorBoard writer, text log or None): only the chief writes them."""
    # Imported here: the readers of a log (tables, plots) start without TensorFlow's seconds.
    import tensorflow as tf

    if not strategy.extended.should_save_summary:
        return tf.summary.create_noop_writer(), None
    return (tf.summary.create_file_writer(os.path.join(output_dir, TENSORBOARD_DIR)),
            _open_train_log(os.path.join(output_dir, TRAIN_LOG_FILE), start_step))


def _open_train_log(path: str, start_step: int):
    """Opens the log for appending: a run resumed at `start_step` adds the steps after it. The
    lines a killed run logged past its last checkpoint are dropped, since the resumed run logs
    those steps again, and so is a partial last line cut mid-write."""
    if os.path.exists(path):
        with open(path, "rb") as reader:
            lines = reader.read().split(b"\n")[:-1]  # the last piece is empty or cut mid-write
        kept = [line for line in lines if _logged_step(line) <= start_step]
        if len(kept) < len(lines) or os.path.getsize(path) != sum(len(line) + 1 for line in lines):
            with open(path + ".tmp", "wb") as writer:
                writer.writelines(line + b"\n" for line in kept)
            os.replace(path + ".tmp", path)
    return open(path, "a", encoding="utf-8")


def _logged_step(line: bytes) -> int:
    """The step of a log line; 0 for one that is not an entry (kept: `read_train_log` names it)."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return 0


def append_log(text_log, step: int, values: dict) -> None:
    if text_log is not None:
        text_log.write(json.dumps({"step": step, **values}) + "\n")
        text_log.flush()


def read_train_log(path: str) -> list[dict]:
    """The entries of a `train_log.jsonl`; where a resumed run logged a step again, the last wins."""
    entries: dict = {}
    with open(path, encoding="utf-8") as reader:
        for number, line in enumerate(reader, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                key = (int(entry["step"]), _is_evaluation(entry))
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a train log entry ({error})") from None
            entries[key] = entry
    return [entries[key] for key in sorted(entries)]


def logged_evaluation(path: str, step: int) -> bool:
    """Whether the `train_log.jsonl` at `path` holds an evaluation at `step` (False: no log)."""
    if not os.path.exists(path):
        return False
    return any(entry["step"] == step and _is_evaluation(entry) for entry in read_train_log(path))


def _is_evaluation(entry: dict) -> bool:
    """An evaluation's entry (`eval_*` metrics), not a training step's: a step may log both."""
    return any(name.startswith("eval_") for name in entry)
