"""Benchmark: every paper preset at the papers' model shape, on this machine's CPU.

Writes a BERT-base-shaped encoder (12 layers x 768, 12 heads, 3,072 intermediate, 512 positions,
a 21,128-token Chinese vocabulary) with random weights in Google's TF1 layout (bert_config.json,
bert_model.ckpt with the MLM head, vocab.txt), so that each run starts through the real loader
(`--init_checkpoint` of a TF1 checkpoint). Then, for each `paper_*` preset of
dialoguecse_tf/presets.py, trains `--steps` steps in a fresh process through the real entry point
(train/run_training.py --preset=...), on records the real record writers (data_prep/) build at the
preset's shape, and records its seconds per step (the first step, which traces the graph,
excluded) and the child's peak resident memory (`os.wait4`'s rusage of that process alone).

The vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK], the printable ASCII characters (lower-cased),
"##" + each lower-case letter and digit, the CJK symbols and punctuation U+3001-U+3011 and the
fullwidth forms U+FF01-U+FF1F, then CJK Unified Ideographs from U+4E00 up to 21,128 entries: a
Chinese text tokenizes one token per character, as under Google's Chinese BERT vocabulary.

Records: the DialogueCSE presets (MLM, contrastive, SiameseBERT) and DSE and SimCSE read the ECD
training sample (the authors' format, ../shared/data/ecd/train/train_data.txt.sample) at their
preset's max_seq_length (JDDC and MDC presets too: only their shape matters here); dial2vec reads
SGD dialogues at 512 tokens. A step is the preset's full batch (1,024 pairs for DSE); where that
does not fit in memory, `--max_examples_per_pass` runs it in passes (DSE: GradCache; dial2vec:
gradient accumulation), one update per batch all the same, and the result records the value.

  python -m benchmarks.paper_shape                          # every paper preset, BERT-base shape
  python -m benchmarks.paper_shape --presets=paper_simcse,paper_ecd_mlm   # a subset first
  python -m benchmarks.paper_shape --num_layers=2 --hidden_size=128 --num_heads=2 \
    --intermediate_size=512 --presets=paper_simcse --output_json=/tmp/paper_shape.json   # a check
"""

import json
import os
import shlex
import subprocess
import sys
import time

from absl import app, flags

from benchmarks import common

REPO_ROOT = common.REPO_ROOT
SHARED_DATA = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")
VOCAB_SIZE = 21128

flags.DEFINE_list("presets", [], "Paper presets to run, in this order (default: every paper_* preset).")
flags.DEFINE_integer("num_layers", 12, "Transformer layers (BERT-base: 12).")
flags.DEFINE_integer("hidden_size", 768, "Hidden width (BERT-base: 768).")
flags.DEFINE_integer("num_heads", 12, "Attention heads (BERT-base: 12).")
flags.DEFINE_integer("intermediate_size", 3072, "Feed-forward width (BERT-base: 3,072).")
flags.DEFINE_integer("steps", 3, "Training steps per preset; the first (graph tracing) is not timed.")
flags.DEFINE_list("max_examples_per_pass", ["paper_dse=128", "paper_dial2vec=1", "paper_dial2vec_tau005=1"],
                  "PRESET=N: train PRESET with --max_examples_per_pass=N, for a paper batch whose activations do "
                  "not fit in this machine's memory whole (estimates at BERT-base: DSE's 1,024 pairs 40 GiB or "
                  "more, 128 pairs a pass 9-10 GiB; dial2vec's 5 dialogues of 10 x 512 tokens about 23 GiB, one "
                  "dialogue a pass about 5 GiB). An empty list runs every batch whole.")
flags.DEFINE_string("work_dir", "/tmp/paper_shape", "Scratch folder: the checkpoint, records and runs.")
flags.DEFINE_string("ecd_file", os.path.join(SHARED_DATA, "ecd", "train", "train_data.txt.sample"),
                    "ECD training sample (the authors' format).")
flags.DEFINE_string("sgd_file", os.path.join(SHARED_DATA, "sgd", "train", "dialogues_001.json"),
                    "SGD dialogues for dial2vec's records.")
flags.DEFINE_string("note", "", "A note on the machine (e.g. whether it was quiet) kept in the results.")
common.define_flags()
flags.DEFINE_string("markdown_from", None, "Print the README table of this results file and exit.")
flags.DEFINE_bool("keep_runs", False,
                  "Keep each preset's checkpoints and encoder under --work_dir (at BERT-base about 1.2 GB a preset, "
                  "30 GB for all of them); by default only each run's train log stays.")
flags.DEFINE_bool("resume", False, "Keep the rows of --output_json that ran at this shape and run the other presets.")

FLAGS = flags.FLAGS


def chinese_vocabulary() -> list:
    """The 21,128 tokens of the module docstring."""
    ascii_chars = sorted({chr(c).lower() for c in range(0x21, 0x7F)})
    pieces = ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    symbols = [chr(c) for c in range(0x3001, 0x3012)] + [chr(c) for c in range(0xFF01, 0xFF20)]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ascii_chars + pieces + symbols
    tokens += [chr(0x4E00 + i) for i in range(VOCAB_SIZE - len(tokens))]
    assert len(tokens) == len(set(tokens)) == VOCAB_SIZE
    return tokens


def write_tf1_checkpoint(folder: str, config) -> None:
    """A random encoder and MLM head in Google's layout, as chinese_L-12_H-768_A-12 ships."""
    import numpy as np

    from dialoguecse_tf.encoder.checkpoints import (TF1_CHECKPOINT_NAME, TF1_CONFIG_FILE, VOCAB_FILE,
                                            backbone_to_tf1_variables, write_tf1_variables)
    from dialoguecse_tf.encoder.backbone import build_backbone

    os.makedirs(folder, exist_ok=True)
    variables = backbone_to_tf1_variables(build_backbone(config))
    rng = np.random.default_rng(0)
    width = config.hidden_size
    variables.update({
        "cls/predictions/transform/dense/kernel": rng.normal(0, 0.02, (width, width)).astype("float32"),
        "cls/predictions/transform/dense/bias": np.zeros(width, "float32"),
        "cls/predictions/transform/LayerNorm/gamma": np.ones(width, "float32"),
        "cls/predictions/transform/LayerNorm/beta": np.zeros(width, "float32"),
        "cls/predictions/output_bias": np.zeros(config.vocab_size, "float32"),
    })
    write_tf1_variables(os.path.join(folder, TF1_CHECKPOINT_NAME), variables)
    config.to_json_file(os.path.join(folder, TF1_CONFIG_FILE))
    with open(os.path.join(folder, VOCAB_FILE), "w", encoding="utf-8") as writer:
        writer.write("\n".join(chinese_vocabulary()) + "\n")


def record_recipe(objective: str, settings: dict) -> tuple:
    """(records folder name, data_prep script, its flags) of the records a preset trains on."""
    length = settings["max_seq_length"]
    ecd = ["--input_file=" + FLAGS.ecd_file, "--input_format=authors", f"--max_seq_length={length}"]
    if objective == "mlm":
        return (f"mlm_{length}", "create_pretraining_data.py",
                ecd + [f"--max_predictions_per_seq={settings['max_predictions_per_seq']}"])
    if objective in ("dialoguecse", "siamese_s", "siamese_m"):
        return f"contrastive_{length}", "create_contrastive_data.py", ecd + ["--context_layout=sides"]
    if objective in ("dse", "simcse"):
        pairing = "consecutive" if objective == "dse" else "self"
        return f"pairs_{pairing}_{length}", "create_pair_data.py", ecd + [f"--pairing={pairing}"]
    if objective == "dial2vec":
        return (f"dialogues_{length}", "create_dialogue_data.py",
                ["--input_file=" + FLAGS.sgd_file, "--input_format=sgd", f"--max_seq_length={length}"])
    raise ValueError(f"no records recipe for objective {objective!r}")


def build_records(name: str, script: str, script_flags: list, vocab_file: str, record_type: str) -> tuple:
    """(records glob, number of examples), written once per work folder."""
    from dialoguecse_tf.records.reader import resolve_records

    folder = os.path.join(FLAGS.work_dir, "records", name)
    if not os.path.isdir(folder):
        command = [sys.executable, os.path.join(REPO_ROOT, "data_prep", script), f"--output_dir={folder}",
                   f"--vocab_file={vocab_file}"] + script_flags
        subprocess.run(command, check=True, cwd=REPO_ROOT)
    pattern = os.path.join(folder, "*.tfrecord")
    _, _, stats = resolve_records((pattern,), record_type)
    return pattern, int(stats["samples_written"])


def timed_run(command: list, log_path: str) -> tuple:
    """Runs `command`: (its exit status, its own peak resident memory in MiB)."""
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    # Reaped here, so that Popen does not wait for it again.
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss / 1024.0


def seconds_per_step(train_log: str) -> float:
    """From train_log.jsonl logged every step: each entry's steps_per_second is the steps since the
    start over the time since the start, so step k ended k / steps_per_second after it."""
    with open(train_log, encoding="utf-8") as reader:
        entries = [json.loads(line) for line in reader if line.strip()]
    ends = {entry["step"]: entry["step"] / entry["steps_per_second"] for entry in entries}
    last = max(ends)
    return (ends[last] - ends[1]) / (last - 1)


def last_error(log_path: str) -> str:
    with open(log_path, encoding="utf-8", errors="replace") as reader:
        lines = [line.strip() for line in reader if line.strip()]
    return lines[-1] if lines else ""


def markdown_table(results: dict) -> str:
    """The README table: one row per preset, in the results' order."""
    lines = ["| preset | objective | max length | batch | examples per pass | s/step | peak RSS MiB |",
             "|---|---|--:|--:|--:|--:|--:|"]
    for row in results["results"]:
        seconds = f"{row['s_per_step']:.1f}" if "s_per_step" in row else f"failed ({row['failed']})"
        lines.append(f"| `{row['preset']}` | {row['objective']} | {row['max_seq_length']} | {row['train_batch_size']} | "
                     f"{row['max_examples_per_pass'] or 'whole batch'} | {seconds} | "
                     f"{row['peak_rss_mib']:,.0f} |")
    return "\n".join(lines)


def main(argv):
    del argv
    if FLAGS.markdown_from:
        with open(FLAGS.markdown_from, encoding="utf-8") as reader:
            print(markdown_table(json.load(reader)))
        return
    from dialoguecse_tf.encoder.bert_config import BertConfig
    from dialoguecse_tf.objectives.registry import get_objective_class
    from dialoguecse_tf.presets import PRESETS

    if FLAGS.steps < 2:
        raise app.UsageError("--steps must be at least 2: the first is not timed")
    presets = FLAGS.presets or [name for name in PRESETS if name.startswith("paper_")]
    unknown = [name for name in presets if name not in PRESETS]
    if unknown:
        raise app.UsageError(f"--presets: unknown {unknown}")
    passes = {}
    for item in FLAGS.max_examples_per_pass:
        preset, _, size = item.partition("=")
        if not size.isdigit() or int(size) < 1 or preset not in PRESETS:
            raise app.UsageError(f"--max_examples_per_pass: expected PRESET=N, a paper preset and N >= 1, got {item!r}")
        passes[preset] = int(size)

    config = BertConfig(vocab_size=VOCAB_SIZE, hidden_size=FLAGS.hidden_size, num_hidden_layers=FLAGS.num_layers,
                        num_attention_heads=FLAGS.num_heads, intermediate_size=FLAGS.intermediate_size,
                        max_position_embeddings=512)
    checkpoint = os.path.join(FLAGS.work_dir, "bert")
    started = time.perf_counter()
    write_tf1_checkpoint(checkpoint, config)
    vocab_file = os.path.join(checkpoint, "vocab.txt")
    print(f"wrote the random {FLAGS.num_layers} x {FLAGS.hidden_size} TF1 checkpoint to {checkpoint} "
          f"in {time.perf_counter() - started:.0f} s")

    shape = {"num_layers": FLAGS.num_layers, "hidden_size": FLAGS.hidden_size, "num_heads": FLAGS.num_heads,
             "intermediate_size": FLAGS.intermediate_size, "max_position_embeddings": 512,
             "vocab_size": VOCAB_SIZE, "weights": "random, written in Google's TF1 layout"}
    output_json = common.results_path(FLAGS.output_json, "paper_shape")
    kept = previous_rows(output_json, shape) if FLAGS.resume else {}
    commands = [previous_command(output_json)] if kept else []
    commands.append(common.command_line())
    rows = []
    for name in presets:
        if name in kept:
            rows.append(kept[name])
            continue
        settings = PRESETS[name]
        objective = settings["objective"]
        records_name, script, script_flags = record_recipe(objective, settings)
        objective_class = get_objective_class(objective)
        train_glob, num_examples = build_records(records_name, script, script_flags, vocab_file,
                                                 objective_class.record_type)
        batch_size = settings.get("train_batch_size") or objective_class.training_defaults["train_batch_size"]
        if num_examples < batch_size:
            raise app.UsageError(f"{name}: {records_name} holds {num_examples} examples, fewer than one batch of "
                                 f"{batch_size}")
        # The presets set epochs, which the stage turns into ceil(epochs * examples / batch) steps.
        epochs = (FLAGS.steps - 0.5) * batch_size / num_examples
        output_dir = os.path.join(FLAGS.work_dir, "runs", name)
        command = [sys.executable, "train/run_training.py", f"--preset={name}", f"--init_checkpoint={checkpoint}",
                   f"--train_file={train_glob}", f"--output_dir={output_dir}", f"--num_train_epochs={epochs!r}",
                   "--log_steps=1", f"--save_checkpoints_steps={FLAGS.steps}", "--overwrite_output_dir"]
        max_examples_per_pass = passes.get(name, 0)
        if max_examples_per_pass:
            command.append(f"--max_examples_per_pass={max_examples_per_pass}")
        print(f"\n{name}: {' '.join(shlex.quote(part) for part in command)}", flush=True)
        log_path = os.path.join(FLAGS.work_dir, f"{name}.log")
        started = time.perf_counter()
        returncode, peak_rss_mib = timed_run(command, log_path)
        row = {
            "preset": name, "objective": objective,
            "command": " ".join(shlex.quote(part) for part in ["python"] + command[1:]).replace(
                FLAGS.work_dir, "$WORK_DIR"),
            "max_seq_length": settings["max_seq_length"], "train_batch_size": batch_size,
            "max_examples_per_pass": max_examples_per_pass, "steps": FLAGS.steps, "timed_steps": FLAGS.steps - 1,
            "records": f"{records_name} ({num_examples} examples)",
            "peak_rss_mib": round(peak_rss_mib, 1), "wall_s": round(time.perf_counter() - started, 1),
        }
        if returncode == 0:
            row["s_per_step"] = round(seconds_per_step(os.path.join(output_dir, "train_log.jsonl")), 3)
        else:
            row["failed"] = f"exit status {returncode}: {last_error(log_path)}"
        if not FLAGS.keep_runs:
            common.prune_run(output_dir, keep=("train_log.jsonl",))
        print(json.dumps(row), flush=True)
        rows.append(row)
        write_rows(commands, shape, rows)

    common.print_table("paper presets at the papers' model shape", [
        "preset", "seq", "batch", "per pass", "s/step", "peak RSS MiB"], [
        [row["preset"], row["max_seq_length"], row["train_batch_size"], row["max_examples_per_pass"] or "-",
         row.get("s_per_step", "failed"), row["peak_rss_mib"]] for row in rows])
    write_rows(commands, shape, rows)


def write_rows(commands: list, shape: dict, rows: list) -> None:
    common.write_results(common.results_path(FLAGS.output_json, "paper_shape"), {
        "command": " && ".join(commands), "shape": shape, "note": FLAGS.note, "results": rows})


def previous_rows(path: str, shape: dict) -> dict:
    """The finished rows of an earlier run at the same shape, by preset (failed ones run again)."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as reader:
        previous = json.load(reader)
    if previous.get("shape") != shape:
        return {}
    return {row["preset"]: row for row in previous["results"] if "s_per_step" in row}


def previous_command(path: str) -> str:
    with open(path, encoding="utf-8") as reader:
        return json.load(reader)["command"]


if __name__ == "__main__":
    app.run(main)
