"""Benchmark: record building, single process against Apache Beam with 1 and 2 worker processes.

Generates (or reuses) a demo corpus of `num_dialogues` dialogues (data_prep/generate_demo_corpus.py's
generator, written as JSON Lines files of `dialogues_per_file` each, so Beam reads the files in
parallel) and a vocabulary from its first 20,000 dialogues, then runs each record type's data_prep
entry point once per engine in a subprocess: `--engine=single`, and where the record type has a
Beam pipeline, `--engine=beam` on the DirectRunner with `--direct_num_workers=1` and `=2`
(`--direct_running_mode=multi_processing`). For each run: wall seconds, dialogues/s, records/s
and peak memory, the sum of the resident memory of the entry point's process and all its
descendants (Beam's worker processes) sampled from /proc every 0.2 s. The JSON also holds a
projection to 10M and 100M dialogues on N workers, its assumptions stated beside it.

The full run takes hours, so it can be run in parts, and the results are written after every
run: rows that this invocation does not measure are kept from `output_json` when it was written
for the same corpus and shard settings, and `--resume` skips the runs already there, e.g.

  python -m benchmarks.record_building --num_dialogues=1000000 --record_types=contrastive,pairs
  python -m benchmarks.record_building --num_dialogues=1000000 --record_types=dialogues,mlm
  python -m benchmarks.record_building --num_dialogues=1000000 --resume   # after a cut-off

`--markdown_from=FILE` prints the README tables of a results file and runs nothing.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import common

REPO = common.REPO_ROOT

RECORD_TYPES = ("contrastive", "mlm", "pairs", "dialogues")

flags.DEFINE_integer("num_dialogues", 1_000_000, "Dialogues in the generated demo corpus.")
flags.DEFINE_integer("dialogues_per_file", 100_000, "Dialogues per corpus file (Beam reads a file per worker).")
flags.DEFINE_string("work_dir", "/tmp/record_building", "Corpus, vocabulary and records; a corpus already "
                    "there for the same settings is reused.")
flags.DEFINE_list("record_types", list(RECORD_TYPES), "Record types to time.")
flags.DEFINE_list("beam_workers", ["1", "2"], "Beam DirectRunner worker processes to time.")
flags.DEFINE_integer("num_shards", 8, "Shards each run writes.")
flags.DEFINE_list("projection_workers", ["8", "32", "128"], "Worker counts of the projection.")
flags.DEFINE_bool("resume", False, "Skip the runs (record type, engine, workers) that `output_json` already holds "
                  "for the same settings.")
flags.DEFINE_bool("keep_records", False, "Keep each run's record files (by default removed once counted).")
common.define_flags()
flags.DEFINE_string("markdown_from", None, "Print the README tables of this results file and exit.")
FLAGS = flags.FLAGS

# Entry point and record-type flags of each record type; the others take their defaults.
ENTRY_POINTS = {
    "contrastive": ("create_contrastive_data.py", []),
    "mlm": ("create_pretraining_data.py", []),
    "pairs": ("create_pair_data.py", []),
    # dial2vec's defaults (512 tokens, 10 samples per dialogue) would write ~300 KB per dialogue.
    "dialogues": ("create_dialogue_data.py", ["--max_seq_length=128", "--samples_per_dialogue=1"]),
}
SAMPLE_SECONDS = 0.2
VOCAB_DIALOGUES = 20_000


def make_corpus(folder: str, num_dialogues: int, per_file: int) -> list:
    """The corpus files (reused when `folder` holds them for these settings) and the vocabulary."""
    from dialoguecse_tf.data.demo import generate_dialogues
    from dialoguecse_tf.data.readers import write_jsonl
    from dialoguecse_tf.encoder.tokenization import build_vocab, write_vocab

    os.makedirs(folder, exist_ok=True)
    marker = os.path.join(folder, "corpus.json")
    settings = {"num_dialogues": num_dialogues, "dialogues_per_file": per_file}
    files = [os.path.join(folder, f"train-{i:05d}.jsonl") for i in range(-(-num_dialogues // per_file))]
    vocab = os.path.join(folder, "vocab.txt")
    if os.path.exists(marker) and json.load(open(marker, encoding="utf-8")) == settings:
        return files, vocab
    for index, path in enumerate(files):
        count = min(per_file, num_dialogues - index * per_file)
        dialogues = generate_dialogues(count, seed=index)
        write_jsonl(dialogues, path)
        if index == 0:
            texts = sorted({turn.text for d in dialogues[:VOCAB_DIALOGUES] for turn in d.turns})
            write_vocab(build_vocab(texts, vocab_size=8000, min_count=2), vocab)
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(settings, f)
    return files, vocab


def _tree_rss_bytes(root: int) -> int:
    """Resident bytes of `root` and all its descendants (from /proc)."""
    children = {}
    rss = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
        rss[int(name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def timed_run(command: list) -> dict:
    """Runs `command`, sampling its process tree's memory; its wall seconds and peak memory."""
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as log:  # a pipe would fill and stall the child
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
        peak = 0
        while process.poll() is None:
            peak = max(peak, _tree_rss_bytes(process.pid))
            time.sleep(SAMPLE_SECONDS)
        seconds = time.perf_counter() - start
        if process.returncode != 0:
            log.seek(0)
            raise RuntimeError(f"{' '.join(command)} failed:\n{log.read()[-3000:]}")
    return {"seconds": round(seconds, 2), "peak_memory_mib": round(peak / 2**20, 1)}


def beam_record_types() -> set:
    from dialoguecse_tf.records.registry import RECORD_TYPES

    return {name for name, record_type in RECORD_TYPES.items() if record_type.beam_builder}


def projection(rows: list, workers: list) -> dict:
    """Hours for 10M and 100M dialogues on N workers from the measured Beam rates."""
    by_type = {}
    for record_type in {row["record_type"] for row in rows}:
        beam = {row["workers"]: row for row in rows if row["record_type"] == record_type and row["engine"] == "beam"}
        if 1 not in beam or 2 not in beam:
            continue
        one, two = beam[1]["dialogues_per_second"], beam[2]["dialogues_per_second"]
        efficiency = min(1.0, two / (2 * one))
        by_type[record_type] = {
            "two_worker_efficiency": round(efficiency, 3),
            "hours": {f"{size // 1_000_000}M_dialogues": {str(n): round(size / (one * n * efficiency) / 3600, 2)
                                                          for n in workers}
                      for size in (10_000_000, 100_000_000)},
            "peak_memory_per_worker_mib": round(beam[2]["peak_memory_mib"] / 2, 1),
        }
    return {
        "assumptions": [
            "each worker builds records at the 1-worker DirectRunner rate measured here, times the 2-worker "
            "scaling efficiency measured here (capped at 1), for every N: no further loss with more workers",
            "the corpus is split into at least N files (a file is read by one worker)",
            "memory per worker stays at the measured 2-worker peak / 2: the corpus-wide state a worker holds is "
            "the bounded negative pool (negative_pool_size; MLM: random_next_pool_size), not the corpus (MLM's "
            "distinct texts are a CombinePerKey, spread over the workers)",
            "the part files' writes and their concatenation into shards scale like the rest (only the parts' names "
            "are shuffled); the storage is no bottleneck; start-up and scheduling costs are left out",
        ],
        "by_record_type": by_type,
    }


def run_key(row: dict) -> tuple:
    return row["record_type"], row["engine"], row["workers"]


def kept_rows(path: str, settings: dict, planned: set, resume: bool) -> tuple:
    """The rows in the results at `path` that this invocation keeps (those it does not rerun:
    every row if `resume`, else those outside `planned`) and the commands that measured them,
    if they were measured with `settings`."""
    if not os.path.exists(path):
        return [], []
    with open(path, encoding="utf-8") as f:
        earlier = json.load(f)
    if any(earlier.get("settings", {}).get(name) != value for name, value in settings.items()):
        return [], []
    rows = [row for row in earlier.get("runs", []) if resume or run_key(row) not in planned]
    return rows, (earlier.get("commands", []) if rows else [])


def planned_runs(record_types: list, beam_types: set, beam_workers: list) -> list:
    """(record type, engine, workers, runner options) of every run, in order."""
    runs = []
    for record_type in record_types:
        runs.append((record_type, "single", 1, []))
        if record_type in beam_types:
            runs.extend((record_type, "beam", int(n), ["--runner=DirectRunner", f"--direct_num_workers={n}",
                                                       "--direct_running_mode=multi_processing"])
                        for n in beam_workers)
    return runs


def write(rows: list, commands: list, settings: dict) -> None:
    common.write_results(common.results_path(FLAGS.output_json, "record_building"), {
        "commands": commands,
        "settings": settings,
        "runs": rows,
        "projection": projection(rows, [int(n) for n in FLAGS.projection_workers]),
    })


def markdown_tables(results: dict) -> str:
    """The measured runs, then the projection, as Markdown."""
    lines = ["| record type | engine | workers | seconds | dialogues/s | records/s | peak memory MiB |",
             "|---|---|--:|--:|--:|--:|--:|"]
    # Record type by record type, the single process first, then Beam by workers, whatever order they ran in.
    for row in sorted(results["runs"], key=lambda row: (RECORD_TYPES.index(row["record_type"]),
                                                        row["engine"] != "single", row["workers"])):
        lines.append(f"| {row['record_type']} | {'single process' if row['engine'] == 'single' else 'Beam DirectRunner'} "
                     f"| {row['workers']} | {row['seconds']:,.0f} | {row['dialogues_per_second']:.1f} "
                     f"| {row['records_per_second']:.1f} | {row['peak_memory_mib']:,.0f} |")
    projected = results["projection"]["by_record_type"]
    if not projected:
        return "\n".join(lines)
    workers = sorted({int(n) for entry in projected.values() for n in entry["hours"]["10M_dialogues"]})
    lines += ["", "| record type | 2-worker efficiency | " + " | ".join(
        f"10M on {n} (h)" for n in workers) + " | " + " | ".join(f"100M on {n} (h)" for n in workers) + " |",
        "|---|--:|" + "--:|" * (2 * len(workers))]
    for record_type in sorted(projected):
        entry = projected[record_type]
        cells = [f"{entry['hours'][size][str(n)]:.2f}" for size in ("10M_dialogues", "100M_dialogues")
                 for n in workers]
        lines.append(f"| {record_type} | {entry['two_worker_efficiency']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv):
    del argv
    if FLAGS.markdown_from:
        with open(FLAGS.markdown_from, encoding="utf-8") as reader:
            print(markdown_tables(json.load(reader)))
        return
    files, vocab = make_corpus(os.path.join(FLAGS.work_dir, "corpus"), FLAGS.num_dialogues, FLAGS.dialogues_per_file)
    beam_types = beam_record_types()
    corpus_settings = {"num_dialogues": FLAGS.num_dialogues, "dialogues_per_file": FLAGS.dialogues_per_file,
                       "num_shards": FLAGS.num_shards}
    runs = planned_runs(FLAGS.record_types, beam_types, FLAGS.beam_workers)
    rows, commands = kept_rows(common.results_path(FLAGS.output_json, "record_building"), corpus_settings,
                               {run[:3] for run in runs}, FLAGS.resume)
    commands = commands + [common.command_line()]
    settings = {**corpus_settings, "corpus_files": len(files),
                "entry_point_flags": {name: extra for name, (_, extra) in ENTRY_POINTS.items()},
                "peak_memory": f"resident memory of the entry point's process tree (Beam's workers included), "
                               f"sampled from /proc every {SAMPLE_SECONDS} s",
                "beam_record_types": sorted(beam_types)}
    done = {run_key(row) for row in rows}
    for record_type, engine, workers, options in runs:
        if (record_type, engine, workers) in done:
            continue
        script, extra = ENTRY_POINTS[record_type]
        output_dir = os.path.join(FLAGS.work_dir, f"{record_type}-{engine}-{workers}")
        command = [sys.executable, os.path.join("data_prep", script), f"--input_file={FLAGS.work_dir}/corpus/*.jsonl",
                   f"--vocab_file={vocab}", f"--output_dir={output_dir}", f"--num_shards={FLAGS.num_shards}",
                   *extra, *([f"--engine={engine}"] if record_type in beam_types else []), *options]
        result = timed_run(command)
        with open(os.path.join(output_dir, "prep_stats.json"), encoding="utf-8") as f:
            stats = json.load(f)
        if not FLAGS.keep_records:  # a million dialogues' contrastive records take about 14 GB a run
            for path in glob.glob(os.path.join(output_dir, "*.tfrecord")):
                os.remove(path)
        row = {"record_type": record_type, "engine": engine, "workers": workers, **result,
               "dialogues": stats["dialogues_kept"], "records": stats["samples_written"],
               "dialogues_per_second": round(stats["dialogues_kept"] / result["seconds"], 1),
               "records_per_second": round(stats["samples_written"] / result["seconds"], 1),
               # The scratch folder is the user's: the results name it $WORK_DIR, not this machine's path.
               "command": " ".join(command[1:]).replace(FLAGS.work_dir, "$WORK_DIR")}
        rows.append(row)
        print(json.dumps(row), flush=True)
        write(rows, commands, settings)
    common.print_table("record building", ["type", "engine", "workers", "dialogues/s", "records/s", "peak MiB"],
                       [[r["record_type"], r["engine"], r["workers"], r["dialogues_per_second"],
                         r["records_per_second"], r["peak_memory_mib"]] for r in rows])
    write(rows, commands, settings)


if __name__ == "__main__":
    app.run(main)
