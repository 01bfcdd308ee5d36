"""Reruns the new user's probes of `../shared/reviews/2026-11-probes.md` and records what each gives.

Every probe runs the toolkit as a user would: the entry points as subprocesses from the
repository root, on the demo corpus, the installed all-MiniLM-L6-v2 and small hand-made inputs
shaped like the review's. Each probe records its command (scratch paths as `$P`, the MiniLM
folder as `$M`), exit status, wall seconds, the child's peak resident memory, the `error:` line
if any, what was observed, and whether it held: the behaviour issue 29 asks for. The JSON is
what docs/reliability.md cites for these probes; this is a check to rerun after changes to the
entry points, not a test (it takes minutes and trains briefly).

  python -m tools.new_user_probes   # writes benchmarks/results/new_user_probes.json
"""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl import app, flags

from benchmarks import common

common.define_flags()
flags.DEFINE_string("scratch_dir", None, "Folder for the probes' inputs and outputs (kept); default: a temporary "
                    "folder removed at the end.")
flags.DEFINE_list("only", [], "Run only the probes with these names (default: all).")
flags.DEFINE_string("in_process", None, "Internal: run this one probe here and print its JSON (needs --scratch_dir "
                    "of a run that prepared it).")
flags.DEFINE_integer("huge_utterance_mb", 50, "Size of the one valid utterance of the huge-utterance probe (the "
                     "review's: 50 MB).")

FLAGS = flags.FLAGS

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO_ROOT}
SENTENCE_LENGTH = 32
# The review's 20 sentences minus its private ones: ASCII, accents, emoji, empty, and the four
# kinds of text NFKC folds (full-width punctuation and Latin, sharp s, ligatures, circled digits).
PROBE_SENTENCES = [
    "where is my order?", "I want to return the shoes I bought last week.", "Can I pay with PayPal?",
    "café crème brûlée", "naïve résumé", "🙂 thanks a lot!", "", "   ",
    "亲，一般三到五天就能到哦", "您好！请问有什么可以帮您？", "ＡＢＣ ｔｅｘｔ！", "Straße", "ﬁnance ﬂight ①②③",
    "e\u0301tude with a combining accent", "Order #48213 hasn't arrived.", "How do I reset my password",
]


@dataclasses.dataclass
class Outcome:
    command: str
    returncode: int
    seconds: float
    max_rss_mb: float
    stdout: str
    stderr: str

    @property
    def error_line(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.startswith("error:")]
        return lines[-1] if lines else ""

    def record(self) -> dict:
        return {"command": self.command, "returncode": self.returncode, "seconds": round(self.seconds, 2),
                "max_rss_mb": round(self.max_rss_mb, 1), "error_line": self.error_line}


class Context:
    def __init__(self, scratch: str, minilm: str):
        self.scratch = scratch
        self.minilm = minilm

    def path(self, *parts) -> str:
        return os.path.join(self.scratch, *parts)

    def shown(self, text: str) -> str:
        return text.replace(self.scratch, "$P").replace(self.minilm, "$M").replace(REPO_ROOT + os.sep, "")

    def run(self, args, stdin: str | None = None) -> Outcome:
        """Runs `python ARGS` (an entry point) from the repository root; peak memory from wait4."""
        command = [sys.executable, *args]
        started = time.perf_counter()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            process = subprocess.Popen(command, cwd=REPO_ROOT, env=ENV, stdout=out, stderr=err,
                                       stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
            if stdin is not None:
                process.stdin.write(stdin.encode("utf-8"))
                process.stdin.close()
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            seconds = time.perf_counter() - started
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
        shown = " ".join(args).replace("dialoguecse_tf/cli/embed.py", "dialoguecse-embed")
        return Outcome(self.shown(shown), process.returncode, seconds, usage.ru_maxrss / 1024, self.shown(stdout),
                       self.shown(stderr))

    def records(self, name: str, script: str, *extra) -> list:
        return [f"data_prep/{script}.py", f"--input_file={self.path('corpus', 'train.jsonl')}", "--input_format=jsonl",
                f"--vocab_file={self.minilm}/vocab.txt", f"--output_dir={self.path('dp', name)}",
                f"--max_seq_length={SENTENCE_LENGTH}", *extra]

    def train(self, name: str, *extra) -> list:
        return ["train/run_training.py", f"--init_checkpoint={self.minilm}", f"--output_dir={self.path('tr', name)}",
                "--objective=dialoguecse", f"--train_file={self.path('dp', 'contrastive', 'contrastive-*')}",
                f"--max_seq_length={SENTENCE_LENGTH}", "--train_batch_size=4", "--num_train_steps=2",
                "--save_checkpoints_steps=1", "--log_steps=1", *extra]

    def embed(self, *extra) -> list:
        return ["dialoguecse_tf/cli/embed.py", *extra]


PROBES = []


IN_PROCESS = {}


def probe(name: str, finding: str, expected: str, in_process: bool = False):
    """Registers a probe. An `in_process` one loads models itself: it runs in a child process of its
    own, so that this process stays small and the children's peak memory (inherited across fork and
    exec) measures only them."""
    def register(function):
        if in_process:
            IN_PROCESS[name] = function
            PROBES.append((name, finding, expected, lambda ctx: _run_isolated(ctx, name)))
        else:
            PROBES.append((name, finding, expected, function))
        return function
    return register


def _run_isolated(ctx, name):
    outcome = ctx.run(["-m", "tools.new_user_probes", f"--in_process={name}",
                       f"--scratch_dir={ctx.scratch}"])
    if outcome.returncode:
        raise RuntimeError(f"{name} failed: {outcome.stderr[-2000:]}")
    observed, held = json.loads(outcome.stdout.strip().splitlines()[-1])
    return [], observed, held


def _write_lines(path: str, lines) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as writer:
        writer.writelines(line + "\n" for line in lines)
    return path


def _dialogue_line(dialogue_id: str, texts) -> str:
    turns = [{"speaker": "user" if i % 2 == 0 else "agent", "text": text} for i, text in enumerate(texts)]
    return json.dumps({"dialogue_id": dialogue_id, "turns": turns}, ensure_ascii=False)


def _files(folder: str) -> list:
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, _, names in os.walk(folder) for name in names) if os.path.isdir(folder) else []


def _version_folder(ctx: Context) -> str:
    import tensorflow_text  # noqa: F401 (registers the ops the export's tokenizer uses)

    base = ctx.path("export", "savedmodel")
    return os.path.join(base, max(os.listdir(base), key=int))


def prepare(ctx: Context) -> dict:
    """What the probes share: the demo corpus, contrastive records and a 2-step encoder with its exports."""
    steps = [
        ["data_prep/generate_demo_corpus.py", f"--output_dir={ctx.path('corpus')}", "--num_dialogues=200",
         "--num_eval_dialogues=200", "--seed=0"],
        ctx.records("contrastive", "create_contrastive_data", "--context_layout=sides", "--num_context_turns=3",
                    "--num_negatives=9"),
        ctx.train("base", "--aggregation=mean", "--num_frozen_layers=3", "--temperature=0.1",
                  "--learning_rate=5e-5", "--num_context_turns=3", "--num_negatives=9"),
        ["export/export_savedmodel.py", f"--checkpoint={ctx.path('tr', 'base', 'encoder')}",
         f"--export_dir={ctx.path('export', 'savedmodel')}", f"--max_seq_length={SENTENCE_LENGTH}",
         "--pooling=mean", "--dialogue_max_seq_length=128"],
        ["export/export_encoder.py", f"--checkpoint={ctx.path('tr', 'base', 'encoder')}",
         f"--output_dir={ctx.path('export', 'huggingface')}", "--format=huggingface",
         f"--max_seq_length={SENTENCE_LENGTH}"],
    ]
    done = [ctx.path("corpus", "demo_stats.json"), ctx.path("dp", "contrastive", "records_info.json"),
            ctx.path("tr", "base", "encoder"), ctx.path("export", "savedmodel"), ctx.path("export", "huggingface")]
    setup = []
    for args, output in zip(steps, done):
        # A kept --scratch_dir reuses what an earlier call built.
        if os.path.exists(output):
            continue
        outcome = ctx.run(args)
        setup.append(outcome.record())
        if outcome.returncode:
            raise RuntimeError(f"setup step failed: {outcome.command}\n{outcome.stderr[-3000:]}")
    return {"setup": setup}


@probe("resume_with_other_settings", "#1", "refused in one line naming learning_rate and temperature; config.json "
       "unchanged; --overwrite_output_dir trains anew")
def _resume_with_other_settings(ctx):
    # A copy of the setup's run, whose encoder the export probes use.
    shutil.rmtree(ctx.path("tr", "resume"), ignore_errors=True)
    shutil.copytree(ctx.path("tr", "base"), ctx.path("tr", "resume"), symlinks=True)
    config_path = ctx.path("tr", "resume", "config.json")
    with open(config_path, encoding="utf-8") as reader:
        before = reader.read()
    changed_settings = ["--aggregation=mean", "--num_frozen_layers=3", "--temperature=0.05", "--learning_rate=1e-3",
                        "--num_context_turns=3", "--num_negatives=9"]
    changed = ctx.run(ctx.train("resume", *changed_settings))
    with open(config_path, encoding="utf-8") as reader:
        unchanged = reader.read() == before
    named = all(name in changed.error_line for name in ("learning_rate", "temperature"))
    over = ctx.run(ctx.train("resume", *changed_settings, "--overwrite_output_dir"))
    with open(config_path, encoding="utf-8") as reader:
        rewritten = json.load(reader)
    trained_anew = over.returncode == 0 and rewritten["learning_rate"] == 1e-3
    return [changed.record(), over.record()], {"config_unchanged": unchanged, "fields_named": named,
                                               "overwrite_trained": trained_anew}, \
        changed.returncode == 1 and unchanged and named and trained_anew


@probe("every_layer_frozen", "#2, #3", "siamese_m, attention and mean DialogueCSE with the default 6 frozen layers "
       "on 6-layer MiniLM refused in one line naming --num_frozen_layers=3; nothing but at most config.json left")
def _every_layer_frozen(ctx):
    outcomes, leftovers = [], {}
    for name, extra in [("siamese_m", ["--objective=siamese_m"]), ("attention", ["--aggregation=attention"]),
                        ("mean", ["--aggregation=mean"])]:
        args = [arg for arg in ctx.train(f"frozen_{name}") if arg != "--objective=dialoguecse"] + extra
        if name != "siamese_m":
            args.append("--objective=dialoguecse")
        outcomes.append(ctx.run(args))
        leftovers[name] = _files(ctx.path("tr", f"frozen_{name}"))
    held = all(o.returncode == 1 and "--num_frozen_layers=3" in o.error_line and "in user code" not in o.error_line
               for o in outcomes) and all(files in ([], ["config.json"]) for files in leftovers.values())
    return [o.record() for o in outcomes], {"left_in_output_dir": leftovers}, held


@probe("invalid_settings", "#8, #13", "a negative or infinite learning rate and a batch size of 0 refused in one "
       "line naming the flag, before any record is read")
def _invalid_settings(ctx):
    cases = [("learning_rate", "--learning_rate=-1e-3"), ("learning_rate", "--learning_rate=inf"),
             ("train_batch_size", "--train_batch_size=0")]
    outcomes = [ctx.run(ctx.train(f"invalid_{i}", "--aggregation=mean", "--num_frozen_layers=3", flag))
                for i, (_, flag) in enumerate(cases)]
    held = all(o.returncode == 1 and name in o.error_line for (name, _), o in zip(cases, outcomes))
    return [o.record() for o in outcomes], {}, held


@probe("collapsed_encoder_metric", "#8; 2026-11b", "a learning rate of 1e6 stops the run in one line "
       "(EncoderCollapseError) before it saves a checkpoint of the collapsed encoder, after a warning that the rate "
       "is far outside every preset's range")
def _collapsed_encoder_metric(ctx):
    outcome = ctx.run(ctx.train("collapsed", "--aggregation=mean", "--num_frozen_layers=3", "--learning_rate=1e6",
                                "--num_train_steps=3"))
    checkpoints = [name for name in _files(ctx.path("tr", "collapsed")) if name.startswith("checkpoints/ckpt-")]
    warned = "far outside every preset's range" in outcome.stderr
    return [outcome.record()], {"checkpoints_written": checkpoints, "warned": warned}, \
        outcome.returncode == 1 and "EncoderCollapseError" in outcome.error_line and not checkpoints and warned


# -- the 2026-11b probes (issue 48): the experiment runner, unknown tokens, ids, line ends, noise --------

_TINY = """run_dir: {runs}
results_dir: {results}
params: {{steps: 4, min_words: 3}}
steps:
  - name: pairs
    tool: pair_records
    flags: {{input_file: {corpus}, input_format: jsonl, vocab_file: "{{minilm}}/vocab.txt", min_words: "{{params.min_words}}"}}
  - name: dse
    tool: train
    flags: {{preset: cpu_dse, train_file: "{{pairs}}/pairs-*", init_checkpoint: "{{minilm}}", {steps_flag}: "{{params.steps}}",
            train_batch_size: 8, save_checkpoints_steps: 2, log_steps: 1}}
"""
EXPERIMENT = "dialoguecse_tf/cli/experiment.py"


def _tiny_experiment(ctx, name: str, steps_flag: str = "num_train_steps", corpus: str | None = None) -> str:
    path = ctx.path("exp", f"{name}.yaml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as writer:
        writer.write(_TINY.format(runs=ctx.path("exp", "runs", name), results=ctx.path("exp", "results", name),
                                  corpus=corpus or ctx.path("corpus", "train.jsonl"), steps_flag=steps_flag))
    return path


@probe("runner_link_then_changed", "2026-11b worst 1", "a step linked from another run whose flags then change "
       "runs anew in place of its link (exit 0); the run it linked to is left as it was")
def _runner_link_then_changed(ctx):
    spec = _tiny_experiment(ctx, "linked_source")
    first = ctx.run([EXPERIMENT, "run", spec])
    target = ctx.path("exp", "runs", "linked_source", "pairs")
    before = _files(target)
    linked_dir = ctx.path("exp", "runs", "linked")
    linked = ctx.run([EXPERIMENT, "run", spec, f"--run_dir={linked_dir}", f"--reuse_under={ctx.path('exp', 'runs')}"])
    links = sorted(name for name in os.listdir(linked_dir) if os.path.islink(os.path.join(linked_dir, name)))
    changed = ctx.run([EXPERIMENT, "run", spec, f"--run_dir={linked_dir}", f"--reuse_under={ctx.path('exp', 'runs')}",
                       "--set", "min_words=2"])
    links_after = sorted(name for name in os.listdir(linked_dir) if os.path.islink(os.path.join(linked_dir, name)))
    return [first.record(), linked.record(), changed.record()], {
        "links_before": links, "links_after": links_after, "target_unchanged": _files(target) == before}, \
        first.returncode == linked.returncode == changed.returncode == 0 and links and not links_after \
        and _files(target) == before


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="utf-8") as reader:
        return reader.read().split(")")[-1].split()[0] != "Z"


@probe("runner_killed_mid_training", "2026-11b worst 2", "a SIGKILLed runner's training child ends too; a second "
       "runner into a run folder in use stops at once in one line naming the first one's pid")
def _runner_killed_mid_training(ctx):
    spec = _tiny_experiment(ctx, "killed")
    run_dir = ctx.path("exp", "runs", "killed")
    runner = subprocess.Popen([sys.executable, EXPERIMENT, "run", spec, "--set", "steps=200"], cwd=REPO_ROOT, env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = os.path.join(run_dir, "dse", "train_log.jsonl")
    deadline = time.time() + 300
    while not os.path.exists(log) and time.time() < deadline and runner.poll() is None:
        time.sleep(0.5)
    second = ctx.run([EXPERIMENT, "run", spec, "--set", "steps=200"])
    children = subprocess.run(["pgrep", "-f", "run_training.py.*exp/runs/killed/dse"], capture_output=True,
                              text=True).stdout.split()
    runner.kill()
    runner.wait()
    time.sleep(10)
    alive = [pid for pid in children if _alive(int(pid))]
    refused = second.returncode == 1 and "is in use by runner pid" in second.error_line
    return [second.record()], {"training_children_seen": len(children), "alive_10_s_after_the_kill": len(alive),
                               "second_runner_refused": refused}, bool(children) and not alive and refused


@probe("runner_dry_run_checks", "2026-11b worst 5", "--dry_run refuses a misspelt flag of a later step and an input "
       "that does not exist, each in one line naming the step, before anything runs; no traceback")
def _runner_dry_run_checks(ctx):
    typo = ctx.run([EXPERIMENT, "run", _tiny_experiment(ctx, "typo", steps_flag="num_train_step"), "--dry_run"])
    missing = ctx.run([EXPERIMENT, "run", _tiny_experiment(ctx, "missing", corpus=ctx.path("nowhere.jsonl")),
                       "--dry_run"])
    held = (typo.returncode == 1 and "step dse: Unknown command line flag 'num_train_step'" in typo.error_line
            and missing.returncode == 1 and "inputs match nothing: pairs:" in missing.error_line
            and "Traceback" not in typo.stderr + missing.stderr
            and not os.path.exists(ctx.path("exp", "runs", "typo")))
    return [typo.record(), missing.record()], {}, held


@probe("unknown_tokens", "2026-11b worst 4", "a mixed Chinese/English corpus prepared with MiniLM's vocabulary: the "
       "prep stats count its [UNK] word pieces and a warning names the vocabulary")
def _unknown_tokens(ctx):
    texts = PROBE_SENTENCES[8:10] + ["亲，一般三到五天就能到哦 where is my order", "退货 please 我想要退货"]
    corpus = _write_lines(ctx.path("in", "mixed.jsonl"), [_dialogue_line(f"m{i}", texts[i % 2:] + texts[:i % 2])
                                                          for i in range(20)])
    outcome = ctx.run(["data_prep/create_pair_data.py", f"--input_file={corpus}", "--input_format=jsonl",
                       f"--vocab_file={ctx.minilm}/vocab.txt", f"--output_dir={ctx.path('dp', 'mixed')}",
                       "--min_words=0"])
    with open(ctx.path("dp", "mixed", "prep_stats.json"), encoding="utf-8") as reader:
        stats = json.load(reader)
    share = stats["unknown_word_pieces"] / stats["word_pieces"]
    warned = "[UNK] with the vocabulary $M/vocab.txt: over 5%" in outcome.stderr
    return [outcome.record()], {"word_pieces": stats["word_pieces"], "unknown_word_pieces": stats["unknown_word_pieces"],
                                "unknown_share": round(share, 4), "warned": warned}, \
        outcome.returncode == 0 and share > 0.05 and warned


@probe("repeated_ids_and_cr_line_ends", "2026-11b #12 and worst 4", "dialoguecse-embed keeps a repeated dialogue id "
       "(a warning names both lines) as the prep tools do; CR-only line ends split as LF and CRLF do")
def _repeated_ids_and_cr(ctx):
    dialogues = _write_lines(ctx.path("in", "dup.jsonl"), [_dialogue_line("x", ["where is my order", "it is late"]),
                                                          _dialogue_line("x", ["refund please", "ok"])])
    cr = ctx.path("in", "cr.txt")
    with open(cr, "wb") as writer:
        writer.write(b"first line\rsecond line\rthird line\r")
    dup = ctx.run(ctx.embed(f"--checkpoint={ctx.minilm}", f"--input_file={dialogues}", "--dialogue_format=jsonl",
                            f"--output_file={ctx.path('out', 'dup.jsonl')}"))
    lines = ctx.run(ctx.embed(f"--checkpoint={ctx.minilm}", f"--input_file={cr}",
                              f"--output_file={ctx.path('out', 'cr.npy')}"))
    rows = int(np.load(ctx.path("out", "cr.npy")).shape[0]) if lines.returncode == 0 else None
    warned = "dialogue id 'x' repeats the dialogue at" in dup.stderr
    return [dup.record(), lines.record()], {"repeat_warned": warned, "cr_rows": rows}, \
        dup.returncode == 0 and warned and rows == 3


@probe("tensorflow_noise", "2026-11b worst 5", "no 'failed call to cuInit' or oneDNN DT_INT64 line on stderr and no "
       "ANSI code or carriage return in a redirected training's stdout")
def _tensorflow_noise(ctx):
    env = {key: value for key, value in ENV.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    outcomes = []
    for args in (ctx.train("noise", "--aggregation=mean", "--num_frozen_layers=3"),
                 ctx.embed(f"--checkpoint={ctx.minilm}", f"--input_file={ctx.path('in', 'cr.txt')}",
                           f"--output_file={ctx.path('out', 'noise.npy')}")):
        done = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
        outcomes.append(done)
    noise = sum(line.count("failed call to cuInit") + line.count("DT_INT64") for done in outcomes
                for line in done.stderr.splitlines())
    bar = sum(done.stdout.count("\x1b[") + done.stdout.count("\r") for done in outcomes)
    return [], {"noise_lines": noise, "ansi_or_cr_in_stdout": bar, "returncodes": [d.returncode for d in outcomes]}, \
        noise == 0 and bar == 0 and all(d.returncode == 0 for d in outcomes)


@probe("embed_export_flags", "#4", "with --export_dir, --normalize is applied (norms 1) in sentence and dialogue "
       "mode, and --pooling / --max_seq_length are refused in one line")
def _embed_export_flags(ctx):
    texts = _write_lines(ctx.path("in", "mixed.txt"), PROBE_SENTENCES[:6])
    export = ctx.path("export", "savedmodel")
    normalized = ctx.run(ctx.embed(f"--export_dir={export}", f"--input_file={texts}", "--normalize",
                                   f"--output_file={ctx.path('out', 'normalized.npy')}"))
    norms = np.linalg.norm(np.load(ctx.path("out", "normalized.npy")), axis=1) if normalized.returncode == 0 else []
    dialogues = _write_lines(ctx.path("in", "dlg.jsonl"), [_dialogue_line(f"d{i}", ["hi", "hello, how can I help?",
                                                                                   "where is my order?", "on its way"])
                                                           for i in range(3)])
    dialogue = ctx.run(ctx.embed(f"--export_dir={export}", f"--input_file={dialogues}", "--dialogue_format=jsonl",
                                 "--normalize", f"--output_file={ctx.path('out', 'dlg.npy')}"))
    dialogue_norms = (np.linalg.norm(np.load(ctx.path("out", "dlg.npy")), axis=1)
                      if dialogue.returncode == 0 else [])
    refused = [ctx.run(ctx.embed(f"--export_dir={export}", f"--input_file={texts}", flag,
                                 f"--output_file={ctx.path('out', 'refused.npy')}"))
               for flag in ("--pooling=cls", "--max_seq_length=8")]
    held = (normalized.returncode == 0 and np.allclose(norms, 1.0, atol=1e-5) and dialogue.returncode == 0
            and np.allclose(dialogue_norms, 1.0, atol=1e-5) and all(o.returncode == 1 for o in refused))
    return [o.record() for o in (normalized, dialogue, *refused)], {
        "sentence_norms": [round(float(n), 6) for n in norms],
        "dialogue_norms": [round(float(n), 6) for n in dialogue_norms]}, held


@probe("huggingface_vs_savedmodel", "#5", "the HuggingFace export (sentence-transformers) and the SavedModel agree "
       "within 1e-5 on every probe sentence, NFKC-folded text included", in_process=True)
def _huggingface_vs_savedmodel(ctx):
    import tensorflow as tf
    from sentence_transformers import SentenceTransformer

    served = tf.saved_model.load(_version_folder(ctx))
    saved = served.signatures["serving_default"](text=tf.constant(PROBE_SENTENCES))["embedding"].numpy()
    hf = SentenceTransformer(ctx.path("export", "huggingface"), device="cpu").encode(
        PROBE_SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
    diff = np.abs(saved - hf).max(axis=1)
    cos = (saved * hf).sum(1) / np.maximum(np.linalg.norm(saved, axis=1) * np.linalg.norm(hf, axis=1), 1e-12)
    worst = int(np.argmax(diff))
    return {"max_abs_diff": float(diff.max()), "min_cosine": float(cos.min()),
            "worst_sentence": PROBE_SENTENCES[worst], "sentences": len(PROBE_SENTENCES)}, float(diff.max()) <= 1e-5


@probe("savedmodel_input_checks", "#9", "embed_tokens refuses mismatched shapes, negative ids and mask values other "
       "than 0/1; embed_dialogues refuses 1 or 3 speakers", in_process=True)
def _savedmodel_input_checks(ctx):
    import tensorflow as tf

    served = tf.saved_model.load(_version_folder(ctx))
    tokens, dialogues = served.signatures["embed_tokens"], served.signatures["embed_dialogues"]
    ids = tf.constant([[101, 2073, 2003, 2026, 102]])
    cases = {
        "shape_mismatch": lambda: tokens(token_ids=ids, padding_mask=tf.ones([1, 4], tf.int32)),
        "negative_id": lambda: tokens(token_ids=tf.constant([[101, -5, 102, 0, 0]]),
                                      padding_mask=tf.constant([[1, 1, 1, 0, 0]])),
        "mask_2": lambda: tokens(token_ids=ids, padding_mask=tf.constant([[1, 1, 2, 1, 1]])),
        "one_speaker": lambda: dialogues(turns=tf.constant(["hi", "hello"]), speakers=tf.constant(["a", "a"]),
                                         dialogue_lengths=tf.constant([2])),
        "three_speakers": lambda: dialogues(turns=tf.constant(["hi", "hello", "hey"]),
                                            speakers=tf.constant(["a", "b", "c"]), dialogue_lengths=tf.constant([3])),
    }
    refused = {}
    for name, call in cases.items():
        try:
            call()
            refused[name] = "accepted"
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as error:
            failed = re.search(r"assertion failed: \[([^\]]*)\]", str(error))
            refused[name] = (failed.group(1) if failed else str(error).strip().splitlines()[0]).strip()[:200]
    return refused, all(message != "accepted" for message in refused.values())


@probe("sr_without_negatives", "#6", "build_sr_set on single-intent data warns on stderr; evaluating an SR file "
       "whose rows have no negative is refused in one line, not scored 100")
def _sr_without_negatives(ctx):
    corpus = _write_lines(ctx.path("in", "one_intent.jsonl"), [
        json.dumps({"dialogue_id": f"o{i}", "turns": [
            {"speaker": "user", "text": f"where is my order number {i}", "intent": "order_status"},
            {"speaker": "agent", "text": "let me check that for you", "intent": "order_status"}]})
        for i in range(40)])
    built = ctx.run(["data_prep/build_sr_set.py", f"--input_file={corpus}", "--input_format=jsonl",
                     f"--output_file={ctx.path('sr1', 'select.txt')}",
                     "--min_turns=0"])
    evaluated = ctx.run(["evaluation/run_evaluation.py", f"--checkpoint={ctx.minilm}", "--model_name=MiniLM",
                         f"--max_seq_length={SENTENCE_LENGTH}", f"--output_dir={ctx.path('ev', 'sr1')}",
                         "--dataset_name=OneIntent", f"--select_file={ctx.path('sr1', 'select.txt')}"])
    warned = "negative" in built.stderr
    return [built.record(), evaluated.record()], {"builder_warned": warned}, \
        warned and evaluated.returncode == 1 and "100.00" not in evaluated.stdout


@probe("huge_utterance", "#7", "one valid 50 MB utterance among the demo's 200 dialogues costs seconds and bounded "
       "memory in every record builder (the review: 280 s and 7.1 GB in contrastive prep)")
def _huge_utterance(ctx):
    source = ctx.path("corpus", "train.jsonl")
    with open(source, encoding="utf-8") as reader:
        lines = reader.read().splitlines()
    huge = json.loads(lines[0])
    size = FLAGS.huge_utterance_mb * 1_000_000
    huge["turns"][1]["text"] = ("the parcel " * (size // 11 + 1))[:size]
    path = _write_lines(ctx.path("in", "huge.jsonl"), [json.dumps(huge)] + lines[1:])
    outcomes, figures = [], {}
    for name, script, extra in [
        ("contrastive", "create_contrastive_data", ["--num_context_turns=3", "--num_negatives=9"]),
        ("pairs", "create_pair_data", ["--pairing=consecutive"]),
        ("dialogues", "create_dialogue_data", ["--num_negatives=4"]),
        ("pretraining", "create_pretraining_data", []),
    ]:
        args = [arg if not arg.startswith("--input_file=") else f"--input_file={path}"
                for arg in ctx.records(f"huge_{name}", script, *extra)]
        outcome = ctx.run(args)
        outcomes.append(outcome)
        figures[name] = {"seconds": round(outcome.seconds, 1), "max_rss_mb": round(outcome.max_rss_mb),
                         "returncode": outcome.returncode}
    held = all(o.returncode == 0 and o.seconds < 60 and o.max_rss_mb < 3000 for o in outcomes)
    return [o.record() for o in outcomes], {"utterance_mb": FLAGS.huge_utterance_mb, **figures}, held


@probe("stale_shards", "#11", "data prep with --num_shards=3 then 1 into one folder leaves one shard")
def _stale_shards(ctx):
    outcomes = [ctx.run(ctx.records("shards", "create_pair_data", "--pairing=consecutive", f"--num_shards={n}"))
                for n in (3, 1)]
    shards = [name for name in _files(ctx.path("dp", "shards")) if name.endswith(".tfrecord")]
    return [o.record() for o in outcomes], {"shards_left": shards}, \
        all(o.returncode == 0 for o in outcomes) and len(shards) == 1


@probe("output_checked_first", "#10", "an output path that is a directory or in a non-writable folder is refused "
       "before any embedding or corpus reading, within seconds")
def _output_checked_first(ctx):
    texts = _write_lines(ctx.path("in", "few.txt"), PROBE_SENTENCES[:3])
    os.makedirs(ctx.path("out", "isdir.npy"), exist_ok=True)
    locked = ctx.path("locked")
    os.makedirs(locked, exist_ok=True)
    os.chmod(locked, 0o555)
    try:
        outcomes = [
            ctx.run(ctx.embed(f"--checkpoint={ctx.minilm}", f"--input_file={texts}",
                              f"--output_file={ctx.path('out', 'isdir.npy')}")),
            ctx.run(ctx.embed(f"--checkpoint={ctx.minilm}", f"--input_file={texts}",
                              f"--output_file={os.path.join(locked, 'v.npy')}")),
            ctx.run(ctx.records("locked", "create_pair_data", "--pairing=consecutive")[:-2]
                    + [f"--output_dir={os.path.join(locked, 'records')}", f"--max_seq_length={SENTENCE_LENGTH}"]),
        ]
    finally:
        os.chmod(locked, 0o755)
    # As root, chmod does not stop a write: only the directory case is then meaningful.
    root = os.geteuid() == 0
    checked = outcomes[:1] if root else outcomes
    held = all(o.returncode == 1 and o.seconds < 15 and ".tmp" not in o.error_line for o in checked)
    return [o.record() for o in outcomes], {"running_as_root": root}, held


@probe("embed_output_formats", "#12", "'.json' output is a JSON array; progress goes to stderr, so stdout holds only "
       "the nearest-neighbour listing; blank lines are never a neighbour")
def _embed_output_formats(ctx):
    texts = _write_lines(ctx.path("in", "blanks_mixed.txt"), ["where is my order?", "", "where is my parcel?",
                                                             "how do I pay?"])
    outcome = ctx.run(ctx.embed(f"--checkpoint={ctx.minilm}", f"--input_file={texts}",
                                f"--output_file={ctx.path('out', 'v.json')}", "--nearest_neighbors=2"))
    try:
        with open(ctx.path("out", "v.json"), encoding="utf-8") as reader:
            rows = json.load(reader)
        is_json = isinstance(rows, list)
    except (OSError, ValueError):
        is_json = False
    clean = "\x1b[" not in outcome.stdout and "step" not in outcome.stdout
    blank_neighbour = bool(re.search(r"^\s+[+-]\d\.\d{3}\s*$", outcome.stdout, re.MULTILINE))
    return [outcome.record()], {"json_parses": is_json, "stdout_clean": clean,
                                "blank_line_as_neighbour": blank_neighbour}, \
        outcome.returncode == 0 and is_json and clean and not blank_neighbour


@probe("few_shot_label", "#13", "a label with fewer training items than 5 shots is skipped and counted; the "
       "evaluation finishes")
def _few_shot_label(ctx):
    with open(ctx.path("corpus", "intent", "intent.json"), encoding="utf-8") as reader:
        intents = json.load(reader)
    intents["train"] = intents["train"] + [["please wrap it as a gift", "gift_wrap_single"]]
    intents["test"] = intents["test"] + [["can you gift wrap this", "gift_wrap_single"]]
    path = ctx.path("in", "intent_single.json")
    with open(path, "w", encoding="utf-8") as writer:
        json.dump(intents, writer)
    outcome = ctx.run(["evaluation/run_evaluation.py", f"--checkpoint={ctx.minilm}", "--model_name=MiniLM",
                       f"--max_seq_length={SENTENCE_LENGTH}", f"--output_dir={ctx.path('ev', 'intent')}",
                       "--dataset_name=Demo", f"--intent_file={path}"])
    results = ctx.path("ev", "intent", "results.json")
    text = open(results, encoding="utf-8").read() if os.path.exists(results) else ""
    counted = "gift_wrap_single" in text
    return [outcome.record()], {"skipped_label_recorded": counted}, outcome.returncode == 0 and counted


@probe("sgd_empty_turn", "release quirk", "an SGD file whose closing SYSTEM turn has an empty utterance reads: the "
       "turn is skipped and counted")
def _sgd_empty_turn(ctx):
    def turn(speaker, text, act):
        return {"speaker": speaker, "utterance": text,
                "frames": [{"service": "Restaurants_1", "actions": [{"act": act}]}]}

    dialogues = [{"dialogue_id": f"1_{i:05d}", "services": ["Restaurants_1"], "turns": [
        turn("USER", "I want to book a table for two tonight", "INFORM_INTENT"),
        turn("SYSTEM", "Which city would you like to eat in?", "REQUEST"),
        turn("USER", "San Jose please, somewhere with Italian food", "INFORM"),
        turn("SYSTEM", "I booked a table at Il Fornaio. Anything else?", "REQ_MORE"),
        turn("USER", "No, that is all for today, thank you", "GOODBYE"), turn("SYSTEM", "", "GOODBYE")]} for i in range(30)]
    folder = ctx.path("in", "sgd", "train")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "dialogues_001.json"), "w", encoding="utf-8") as writer:
        json.dump(dialogues, writer)
    outcome = ctx.run([arg if not arg.startswith(("--input_file=", "--input_format="))
                       else (f"--input_file={folder}" if arg.startswith("--input_file=") else "--input_format=sgd")
                       for arg in ctx.records("sgd", "create_pair_data", "--pairing=consecutive")])
    stats_text = "".join(open(os.path.join(ctx.path("dp", "sgd"), name), encoding="utf-8").read()
                         for name in _files(ctx.path("dp", "sgd")) if name.endswith(".json"))
    counted = re.search(r'"empty_turns_skipped": (\d+)', stats_text)
    return [outcome.record()], {"empty_turns_skipped": int(counted.group(1)) if counted else None}, \
        outcome.returncode == 0 and counted is not None and int(counted.group(1)) == 30


@probe("sr_repeated_ids", "release quirk", "an SR file repeating an id in one query's positives is scored as the "
       "authors' eval_selection.py scores it (the repeat counts twice) and counted")
def _sr_repeated_ids(ctx):
    with open(ctx.path("corpus", "sr", "select.txt"), encoding="utf-8") as reader:
        rows = reader.read().splitlines()
    fields = rows[0].split("\t")
    positives = fields[3].split(",") if len(fields) > 3 else []
    if positives:
        fields[3] = ",".join(positives + positives[:1])
    rows[0] = "\t".join(fields)
    path = _write_lines(ctx.path("in", "sr_repeat", "select.txt"), rows)
    outcome = ctx.run(["evaluation/run_evaluation.py", f"--checkpoint={ctx.minilm}", "--model_name=MiniLM",
                       f"--max_seq_length={SENTENCE_LENGTH}", f"--output_dir={ctx.path('ev', 'sr_repeat')}",
                       "--dataset_name=Demo", f"--select_file={path}"])
    results = ctx.path("ev", "sr_repeat", "results.json")
    text = open(results, encoding="utf-8").read() if os.path.exists(results) else ""
    counted = re.search(r'"sr_queries_with_repeated_ids": (\d+)', text)
    return [outcome.record()], {"sr_queries_with_repeated_ids": int(counted.group(1)) if counted else None}, \
        outcome.returncode == 0 and counted is not None and int(counted.group(1)) == 1


def main(argv):
    del argv
    minilm = common.default_hf_folder()
    if FLAGS.in_process:
        observed, held = IN_PROCESS[FLAGS.in_process](Context(os.path.abspath(FLAGS.scratch_dir), minilm))
        print(json.dumps([observed, bool(held)], ensure_ascii=False))
        return
    scratch = FLAGS.scratch_dir or tempfile.mkdtemp(prefix="probes-")
    os.makedirs(scratch, exist_ok=True)
    ctx = Context(os.path.abspath(scratch), minilm)
    report = {**prepare(ctx), "probes": []}
    for name, finding, expected, function in PROBES:
        if FLAGS.only and name not in FLAGS.only:
            continue
        started = time.perf_counter()
        try:
            commands, observed, held = function(ctx)
        except Exception as error:  # noqa: BLE001 (a probe that cannot run is recorded as not held)
            commands, observed, held = [], {"probe_error": f"{type(error).__name__}: {error}"[:500]}, False
        report["probes"].append({"name": name, "finding": finding, "expected": expected, "held": bool(held),
                                 "observed": observed, "runs": commands,
                                 "seconds": round(time.perf_counter() - started, 1)})
        print(f"{'held  ' if held else 'FAILED'} {name}: {json.dumps(observed, ensure_ascii=False)[:300]}", flush=True)
    report["command"] = " ".join(["python -m tools.new_user_probes"]
                                 + [f"--{name}={FLAGS[name].value}" for name in ("huge_utterance_mb", "output_json")
                                    if FLAGS[name].present]
                                 + ([f"--only={','.join(FLAGS.only)}"] if FLAGS.only else []))
    report["held"] = sum(p["held"] for p in report["probes"])
    report["total"] = len(report["probes"])
    common.write_results(common.results_path(FLAGS.output_json, "new_user_probes"), report)
    if not FLAGS.scratch_dir:
        shutil.rmtree(scratch)
    print(f"{report['held']} of {report['total']} probes held", flush=True)


if __name__ == "__main__":
    app.run(main)
