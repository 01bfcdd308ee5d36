"""`EvaluationConfig`: everything one evaluation run needs, written as `config.json`.

Field names equal the flag names of `evaluation/run_evaluation.py`, so
`cli.flag_utils.config_from_flags` fills it directly. The module does not import TensorFlow:
a command line is checked before the slow imports start.
"""

from __future__ import annotations

import dataclasses
import glob
import os

from dialoguecse_tf.config_fields import POOLING_HELP, POOLING_MODES, PRECISION_HELP, PRECISIONS, field, field_kind
from dialoguecse_tf.data.intent import SPLITS as INTENT_SPLITS
from dialoguecse_tf.data.readers import READERS
from dialoguecse_tf.evaluation.dialogue_sets import DIALOGUE_LABELS
from dialoguecse_tf.evaluation.registry import (BASELINES, DIALOGUE_PROTOCOLS, check_dialogue_protocol, display_name,
                                                get_baseline)
from dialoguecse_tf.evaluation.suite import LEGACY_FILE_FLAGS, SuiteEntry, suite_entries, suite_from_legacy
from dialoguecse_tf.evaluation.tasks.finetune_base import PRESET_NAMES as FINETUNE_PRESETS
from dialoguecse_tf.evaluation.tasks.registry import get_task, task_names

# "lines": one sentence per line; the others are the corpus readers' formats, whose
# utterances (and candidate responses) become the training sentences.
TRAIN_TEXT_FORMATS = ("lines",) + tuple(READERS)


@dataclasses.dataclass(frozen=True)
class FlowConfig:
    """The BERT-flow baseline's flow and its training (see `flow.py`)."""

    num_couplings: int = 8  # blocks of ActNorm + permutation + affine coupling
    hidden_units: int = 256  # width of the two hidden layers of each coupling's MLP
    steps: int = 1000  # Adam steps; about one epoch over ~64k training sentences
    batch_size: int = 64
    learning_rate: float = 1e-3
    log_scale_bound: float = 2.0  # coupling scales stay within exp(+-log_scale_bound)
    seed: int = 0

    def __post_init__(self):
        for name in ("num_couplings", "hidden_units", "steps", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"flow {name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("learning_rate", "log_scale_bound"):
            if not getattr(self, name) > 0:
                raise ValueError(f"flow {name} must be positive, got {getattr(self, name)!r}")


@dataclasses.dataclass(frozen=True)
class FitOptions:
    """How the fitted baselines are fitted."""

    whitening_dim: int | None = None  # None keeps every dimension
    flow: FlowConfig = FlowConfig()


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """Which checkpoints and baselines to evaluate on which datasets, and how.

    Datasets: an evaluation suite (`evaluation.suite`), given as `eval_task` entries
    (DATASET:TASK:PATH) and/or an `eval_suite` file. Or, as before suites, `dataset_name` and the
    task files (`select_file`, `sts_file`, `intent_file`, `oos_file`, `dialogue_file`) as parallel
    lists, entry i of each describing dataset i; an empty string means "this dataset has no such
    file". With a single dataset the name may be omitted (it is then "dev").

    Models: each `checkpoint` is shown under the `model_name` at the same position (default:
    the checkpoint folder's name). Without `baselines` each checkpoint is evaluated as is with
    `pooling` (unset: each checkpoint's own); with `baselines` each checkpoint gives one row per
    baseline, named e.g. "<model_name>-flow" (see `baselines`; a model name "BERT(adapt)" gives
    Table 2's adapt rows).
    """

    checkpoint: tuple[str, ...] = field(
        (), "Comma-separated checkpoints to evaluate: Google TF1 BERT, HuggingFace BERT or this project's.",
        flag="list")
    output_dir: str | None = field(None, "Where config.json, results.json and results.md are written.")
    eval_task: tuple[str, ...] = field(
        (), "An evaluation as DATASET:TASK:PATH, e.g. ECD:sr:../shared/data/ecd/dev/select.txt; repeat for "
        "several. Tasks: " + ", ".join(task_names()) + ". Instead of the per-dataset file flags.")
    eval_suite: str | None = field(
        None, "A JSON evaluation suite: a list of {\"dataset\", \"task\", \"file\"} objects (as --eval_task); "
        "instead of the per-dataset file flags.")
    select_file: tuple[str, ...] = field((), "SR file (select.txt) of a dataset; repeat once per dataset, '' for none.")
    sts_file: tuple[str, ...] = field((), "D-STS file (sts.txt) of a dataset; repeat once per dataset, '' for none.")
    intent_file: tuple[str, ...] = field(
        (), "Few-shot intent set of a dataset (a folder with train.json and test.json, a JSON object with 'train' "
        "and 'test', or one JSON list split 85/15 per label); repeat once per dataset, '' for none.")
    intent_split: str = field(
        "seeded", "How an intent set given as one JSON list (HWU64) is split, per label: seeded, the first 85% "
        "after a seeded shuffle; first, its first 85% in file order (DSE's release's rule, on a file whose order "
        "is not the release's: its label map is not public).", choices=INTENT_SPLITS)
    oos_file: tuple[str, ...] = field(
        (), "Out-of-scope detection set of a dataset (CLINC150's data_oos_plus.json, as DSE's release, or "
        "data_full.json); repeat once per dataset, '' for none.")
    dialogue_file: tuple[str, ...] = field(
        (), "Labelled dialogues of a dataset for dial2vec's clustering, relatedness and retrieval (an SGD folder or "
        "dialogues_*.json, or a .jsonl corpus with services; single-service dialogues are used); repeat once per "
        "dataset, '' for none.")
    dialogue_label: str = field("service", "Label of a dialogue: its service (e.g. Restaurants_2, as dial2vec) or "
                                "its domain (Restaurants).", choices=DIALOGUE_LABELS)
    finetune_preset: str = field(
        "release", "Settings of the fine-tuned tasks (intent_ft, dialogue_act): release, DSE's ft.sh; cpu, fewer "
        "runs, epochs and scored items, sized for 2 CPU cores (each task's module says what it cuts).",
        choices=FINETUNE_PRESETS, added_as="release")
    dialogue_protocol: tuple[str, ...] = field(
        ("interlocutor",), "How each checkpoint's row embeds dialogues: one protocol for every checkpoint, or one "
        "per checkpoint in the same order. " + "; ".join(f"{name}: {text}" for name, text in DIALOGUE_PROTOCOLS.items())
        + ".", flag="list")
    dialogue_max_seq_length: int = field(512, "Tokens per packed dialogue (interlocutor and plain_mean protocols) or "
                                         "utterance (utterance_token_mean), cut as the checkpoint's training cut them "
                                         "(a dial2vec run's --truncation; otherwise the first tokens are kept).")
    dataset_name: tuple[str, ...] = field(
        (), "Column name of a dataset (e.g. ECD, JDDC); repeat once per dataset. Optional with one dataset "
        "(default 'dev').")
    model_name: tuple[str, ...] = field(
        (), "Display name per checkpoint, same order (default: folder names). With --baselines each row is named "
        "from it, e.g. BERT -> BERT-avg; BERT(adapt) for the MLM-pretrained checkpoint.", flag="list")
    baselines: tuple[str, ...] = field(
        (), "Baselines to apply to every checkpoint: " + ", ".join(BASELINES) + ". Empty: evaluate each "
        "checkpoint as it is, with --pooling.", flag="list")
    train_text_file: str | None = field(
        None, "Unlabelled in-domain sentences the whitening and flow baselines are fitted on (never the "
        "evaluation files). Required by those baselines.")
    train_text_format: str = field(
        "lines", "lines: one sentence per line; a corpus format: every utterance of a corpus in that format "
        "(train_text_file may then be a glob).",
        choices=TRAIN_TEXT_FORMATS)
    pooling: str | None = field(None, "Pooling of checkpoints evaluated without --baselines: " + POOLING_HELP,
                                choices=POOLING_MODES)
    max_seq_length: int = field(128, "Longer sentences are truncated (paper: 50 for ECD, 100 for JDDC).")
    batch_size: int = field(64, "Sentences per forward pass.")
    precision: str = field("float32", "Compute precision of every checkpoint row's encoder (its vectors float32 in "
                           "every one): " + PRECISION_HELP, choices=PRECISIONS, added_as="float32")
    whitening_dim: int | None = field(None, "Dimensions kept by BERT-whitening; unset keeps all.")
    flow_couplings: int = field(FlowConfig.num_couplings, "BERT-flow: ActNorm + affine coupling blocks.")
    flow_hidden_units: int = field(FlowConfig.hidden_units, "BERT-flow: width of each coupling's MLP.")
    flow_steps: int = field(FlowConfig.steps, "BERT-flow: Adam steps of maximum-likelihood training.")
    flow_batch_size: int = field(FlowConfig.batch_size, "BERT-flow: training batch size.")
    flow_learning_rate: float = field(FlowConfig.learning_rate, "BERT-flow: Adam learning rate.")
    random_seed: int = field(FlowConfig.seed, "Seed of the flow's initialisation and batch order.")

    def __post_init__(self):
        for spec in dataclasses.fields(self):
            if field_kind(type(self), spec.name)[1]:
                object.__setattr__(self, spec.name, tuple(getattr(self, spec.name) or ()))
        if not self.checkpoint:
            raise ValueError("give at least one checkpoint to evaluate")
        if not self.output_dir:
            raise ValueError("output_dir is required")
        if not self.model_name:
            names = tuple(os.path.basename(os.path.normpath(path)) for path in self.checkpoint)
            object.__setattr__(self, "model_name", names)
        if len(self.model_name) != len(self.checkpoint):
            raise ValueError(
                f"give one model_name per checkpoint: {len(self.checkpoint)} checkpoints, "
                f"{len(self.model_name)} model names"
            )
        for name in self.baselines:
            get_baseline(name)
        if self.pooling is not None and self.pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {self.pooling!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.train_text_format not in TRAIN_TEXT_FORMATS:
            raise ValueError(f"train_text_format must be one of {TRAIN_TEXT_FORMATS}, got {self.train_text_format!r}")
        if self.needs_train_texts and not self.train_text_file:
            raise ValueError(
                f"baselines {[b for b in self.baselines if get_baseline(b).needs_train_texts]} are fitted on "
                "unlabelled training sentences: give train_text_file"
            )
        if self.baselines and any(get_task(entry.task).input_kind == "dialogues" for entry in self.entries()):
            raise ValueError("the dialogue tasks evaluate checkpoints as they are (with --dialogue_protocol); the "
                             "baselines are sentence embeddings: evaluate them in a separate run")
        for name in self.dialogue_protocol:
            check_dialogue_protocol(name)
        if len(self.dialogue_protocol) not in (1, len(self.checkpoint)):
            raise ValueError(f"give one dialogue_protocol for every checkpoint or one per checkpoint: "
                             f"{len(self.checkpoint)} checkpoints, {len(self.dialogue_protocol)} protocols")
        for name in ("max_seq_length", "batch_size", "dialogue_max_seq_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.whitening_dim is not None and self.whitening_dim < 1:
            raise ValueError(f"whitening_dim must be positive, got {self.whitening_dim}")
        # Built once here so that a bad value fails before any model is loaded.
        self.fit_options()
        self.entries()
        self.model_rows()

    @property
    def needs_train_texts(self) -> bool:
        return any(get_baseline(name).needs_train_texts for name in self.baselines)

    def fit_options(self) -> FitOptions:
        return FitOptions(
            whitening_dim=self.whitening_dim,
            flow=FlowConfig(
                num_couplings=self.flow_couplings,
                hidden_units=self.flow_hidden_units,
                steps=self.flow_steps,
                batch_size=self.flow_batch_size,
                learning_rate=self.flow_learning_rate,
                seed=self.random_seed,
            ),
        )

    def dialogue_protocols(self) -> list[str]:
        """Each checkpoint's dialogue protocol, in checkpoint order."""
        if len(self.dialogue_protocol) == 1:
            return list(self.dialogue_protocol) * len(self.checkpoint)
        return list(self.dialogue_protocol)

    def model_rows(self) -> list[tuple[str, list[tuple[str, str | None]]]]:
        """Per checkpoint, its results-table rows as (display name, baseline name or None)."""
        rows = []
        for checkpoint, model_name in zip(self.checkpoint, self.model_name):
            if self.baselines:
                rows.append((checkpoint, [(display_name(name, model_name), name) for name in self.baselines]))
            else:
                rows.append((checkpoint, [(model_name, None)]))
        names = [name for _, named in rows for name, _ in named]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"several results rows would be named {repeated}; give distinct model_name values")
        return rows

    def entries(self) -> list[SuiteEntry]:
        """The evaluation suite: `eval_suite`'s and `eval_task`'s entries, or those of the
        per-dataset file flags."""
        legacy = ("dataset_name",) + tuple(LEGACY_FILE_FLAGS)
        given = [name for name in legacy if getattr(self, name)]
        if self.eval_suite or self.eval_task:
            if given:
                raise ValueError(f"give the evaluation sets either as eval_task/eval_suite or as the per-dataset "
                                 f"flags ({', '.join(given)}), not both")
            return suite_entries(self.eval_suite, self.eval_task)
        if not given:
            raise ValueError(f"give at least one eval_task (DATASET:TASK:PATH), an eval_suite, or the per-dataset "
                             f"flags ({', '.join(LEGACY_FILE_FLAGS)})")
        return suite_from_legacy(self.dataset_name, {flag: getattr(self, flag) for flag in LEGACY_FILE_FLAGS})

    def _train_texts_exist(self) -> bool:
        path = self.train_text_file
        if self.train_text_format == "lines":
            return os.path.isfile(path)
        # A corpus format may name a glob, and the sgd reader a folder.
        if glob.has_magic(path):
            return bool(glob.glob(path))
        return os.path.isfile(path) or (self.train_text_format == "sgd" and os.path.isdir(path))

    def check_files(self) -> None:
        """Raises FileNotFoundError for the first input file or checkpoint that does not exist."""
        for entry in self.entries():
            if not entry.file_exists:
                raise FileNotFoundError(f"{entry.task} file of dataset {entry.dataset!r} not found: {entry.file}")
        if self.needs_train_texts and not self._train_texts_exist():
            raise FileNotFoundError(f"train_text_file not found: {self.train_text_file}")
        for path in self.checkpoint:
            # A Google checkpoint may be named by its prefix (".../bert_model.ckpt").
            if not (os.path.exists(path) or os.path.exists(path + ".index")):
                raise FileNotFoundError(f"checkpoint not found: {path}")
