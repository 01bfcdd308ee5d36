"""Tiny inputs and command lines for running the training entry points as subprocesses.

Shared by the crash-safety and determinism tests, which restart or repeat the real
commands, each in a process of its own forked from a server that imported TensorFlow once
(tests/forked_entry_points.py). The BERT configs keep dropout on: resuming and repeating
must be exact with it. The pretraining flags use `--input_file` (pretrain/run_pretraining.py's
name for `--train_file`); the finetuning flags name their objective, so they serve both
finetune/run_finetuning.py and train/run_training.py; the contrastive records keep left and
right contexts apart ("sides"), so they serve either DialogueCSE variant. `setup` and `stage`
give the same kind of inputs, dropout off, as the settings of a stage run in process (the
contrastive stage's tests, and the multi-worker test's one-process reference).
"""

import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import forked_entry_points
from conftest import REPO_ROOT
from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import save_checkpoint
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.records.contrastive import ContrastiveRecordSpec, write_contrastive_records
from dialoguecse_tf.records.mlm import MlmRecordSpec, write_mlm_records
from dialoguecse_tf.stage import configure

PRETRAIN = str(REPO_ROOT / "pretrain" / "run_pretraining.py")
FINETUNE = str(REPO_ROOT / "finetune" / "run_finetuning.py")
TRAIN = str(REPO_ROOT / "train" / "run_training.py")
RUN_EVALUATION = str(REPO_ROOT / "evaluation" / "run_evaluation.py")
MAX_SEQ_LENGTH = 10
DROPOUT = 0.1
# Each length bucket traces the encoder once more, and tracing is most of a tiny run's cost: two
# (against the default four) still run the bucketed path in every training test (test_backbone.py
# and test_models_dialoguecse.py check bucketing's arithmetic).
LENGTH_BUCKETS = 2

TOPICS = [
    ["where is my order", "track my package", "my order is late", "when is delivery"],
    ["i want a refund", "money back please", "refund my order", "give me my money back"],
    ["change my address", "ship to a new address", "my address is wrong", "new address please"],
    ["discount code please", "is there a discount", "hello discount", "code for discount"],
]
PROBE_SENTENCES = ["where is my order", "i want a refund please", "change my address", "discount code"]


def _dialogues(count: int, turns: int) -> list:
    rng = np.random.default_rng(0)
    return [
        Dialogue(str(i), tuple(Turn(str(j % 2), TOPICS[i % 4][rng.integers(4)]) for j in range(turns)))
        for i in range(count)
    ]


def write_pretraining_inputs(folder, vocab_file, bert_config) -> list:
    """MLM records and a dropout-on config; returns the stage's input flags."""
    tokenizer = Tokenizer(vocab_file, max_seq_length=MAX_SEQ_LENGTH)
    spec = MlmRecordSpec(max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=2)
    write_mlm_records(_dialogues(40, 6), tokenizer, str(folder / "mlm_records"), spec, random_seed=3)
    config_file = folder / "bert_config.json"
    bert_config.replace(hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT).to_json_file(
        str(config_file)
    )
    return [f"--input_file={folder / 'mlm_records' / 'mlm-*'}", f"--bert_config_file={config_file}",
            f"--vocab_file={vocab_file}", f"--max_seq_length={MAX_SEQ_LENGTH}", "--max_predictions_per_seq=2",
            "--train_batch_size=8", "--learning_rate=2e-3", "--num_warmup_steps=2"]


def write_finetuning_inputs(folder, vocab_file, bert_config) -> list:
    """Contrastive records and a random 3-layer, dropout-on start checkpoint; returns the flags
    (DialogueCSE's default variant, the released one)."""
    tokenizer = Tokenizer(vocab_file, max_seq_length=MAX_SEQ_LENGTH)
    spec = ContrastiveRecordSpec(max_seq_length=MAX_SEQ_LENGTH, num_context_turns=3, num_negatives=4,
                                 context_layout="sides")
    write_contrastive_records(_dialogues(24, 5), tokenizer, str(folder / "contrastive_records"), spec,
                              random_seed=1)
    config = bert_config.replace(num_hidden_layers=3, hidden_dropout_prob=DROPOUT,
                                 attention_probs_dropout_prob=DROPOUT)
    save_checkpoint(str(folder / "init"), build_backbone(config), config, tokenizer)
    return [f"--train_file={folder / 'contrastive_records' / 'contrastive-*'}", f"--init_checkpoint={folder / 'init'}",
            "--objective=dialoguecse", f"--max_seq_length={MAX_SEQ_LENGTH}", "--num_negatives=4",
            "--num_frozen_layers=1", "--train_batch_size=8", "--learning_rate=3e-3", "--aggregation=attention",
            "--attention_hidden_size=16", f"--num_length_buckets={LENGTH_BUCKETS}"]


def write_evaluation_files(folder) -> dict:
    """An SR set (select.txt), a D-STS set (sts.txt) and training sentences, from TOPICS."""
    sentences = [sentence for topic in TOPICS for sentence in topic]
    lines = []
    for i, sentence in enumerate(sentences):
        positives = [j for j in range(len(sentences)) if j != i and j // 4 == i // 4]
        negatives = [j for j in range(len(sentences)) if j // 4 != i // 4][:5]
        lines.append(f"{i}\t{sentence}\t{i // 4}\t{','.join(map(str, positives))}\t{','.join(map(str, negatives))}\n")
    (folder / "select.txt").write_text("".join(lines), encoding="utf-8")
    pairs = [(5, 0, 1), (1, 0, 4), (4, 4, 6), (1, 9, 13), (3, 8, 10), (2, 3, 12)]
    (folder / "sts.txt").write_text(
        "".join(f"{score}\t{sentences[a]}\t{sentences[b]}\n" for score, a, b in pairs), encoding="utf-8"
    )
    (folder / "train.txt").write_text("\n".join(sentences + PROBE_SENTENCES) + "\n", encoding="utf-8")
    return {name: str(folder / f"{name}.txt") for name in ("select", "sts", "train")}



def stage(settings: dict, objective: str = "dialoguecse", **overrides):
    """(objective, TrainConfig) from the flat settings, as a command line gives them."""
    return configure(objective, **{**settings, **overrides})


@pytest.fixture
def setup(tmp_path, tiny_vocab_file, tiny_bert_config):
    """Topic-coherent dialogues, their contrastive records and a random-init checkpoint; returns the
    settings every contrastive objective shares (each objective adds its own options). The records
    keep left and right contexts apart ("sides"), which serves every objective and variant."""
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=10)
    spec = ContrastiveRecordSpec(max_seq_length=10, num_context_turns=4, num_negatives=5, context_layout="sides")
    write_contrastive_records(_dialogues(40, 5), tokenizer, str(tmp_path / "records"), spec, random_seed=1)
    config = tiny_bert_config.replace(num_hidden_layers=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    # A seeded start: otherwise it depends on what ran before in the process (or on nothing).
    keras.utils.set_random_seed(0)
    backbone = build_backbone(config)
    save_checkpoint(str(tmp_path / "init"), backbone, config, tokenizer)
    return dict(
        train_file=(str(tmp_path / "records" / "contrastive-*"),), output_dir=str(tmp_path / "run"),
        init_checkpoint=str(tmp_path / "init"), max_seq_length=10, num_context_turns=3, num_negatives=4,
        num_frozen_layers=1, train_batch_size=8, learning_rate=3e-3, num_train_steps=40, log_steps=1,
        save_checkpoints_steps=10, num_length_buckets=LENGTH_BUCKETS,
    )

def command(script: str, *flags) -> list:
    return [sys.executable, script, *flags]


def environment() -> dict:
    # Unbuffered, so that a killed run's log holds everything it printed.
    return {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}


def start(args: list, log_path) -> forked_entry_points.Started:
    """Starts a command (`command`'s list) in the background, its output going to `log_path`."""
    assert args[0] == sys.executable, args
    return forked_entry_points.start(args[1:], log_path, env=environment(), cwd=REPO_ROOT)


def finish(process: forked_entry_points.Started, log_path) -> str:
    """Waits for a command started by `start`; returns its output, failing with the output's tail."""
    process.wait()
    output = open(log_path, encoding="utf-8").read()
    assert process.returncode == 0, f"{process.args[1]} failed:\n{output[-3000:]}"
    return output


def run_together(commands: dict, folder) -> dict:
    """Runs {name: args} side by side (the commands are independent); returns {name: output}."""
    processes = {name: start(args, folder / f"{name}.log") for name, args in commands.items()}
    try:
        return {name: finish(process, folder / f"{name}.log") for name, process in processes.items()}
    finally:
        for process in processes.values():
            process.kill()
            process.wait()


def scalars(output_dir, tag: str) -> dict:
    """{step: value} of one TensorBoard scalar over all event files of a run (later files win)."""
    values = {}
    folder = os.path.join(output_dir, "tensorboard")
    for path in sorted(tf.io.gfile.glob(os.path.join(folder, "events.out.tfevents.*")), key=os.path.getmtime):
        try:
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    if value.tag == tag:
                        values[event.step] = float(tf.make_ndarray(value.tensor))
        except tf.errors.DataLossError:
            pass  # the last record of a killed run's file may be cut short; the rest was read
    return values


def assert_best_is_the_first_argmax(run_dir, metric: str, best: dict, evaluated_steps: tuple) -> None:
    """The kept encoder is the evaluation with the highest `metric` in the run's train log, the
    earliest on a tie (a later equal score does not replace it); the logged scores must differ,
    so that a broken comparison could not pick the right step by chance."""
    from dialoguecse_tf.training.train_log import TRAIN_LOG_FILE, read_train_log

    scores = {entry["step"]: entry[f"eval_{metric}"] for entry in read_train_log(os.path.join(run_dir, TRAIN_LOG_FILE))
              if f"eval_{metric}" in entry}
    assert tuple(sorted(scores)) == evaluated_steps
    assert len(set(scores.values())) > 1, f"every evaluation scored {metric} alike: {scores}"
    best_value = max(scores.values())
    assert best["step"] == min(step for step, value in scores.items() if value == best_value), (best, scores)
    assert best["eval"][metric] == best_value
