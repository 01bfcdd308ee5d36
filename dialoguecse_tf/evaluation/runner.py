"""One evaluation run: files -> models -> metrics -> `results.json` and `results.md`."""

from __future__ import annotations

import glob
import os
import time

from absl import logging

from dialoguecse_tf.config_io import config_to_dict
from dialoguecse_tf.data.readers import read_corpus
from dialoguecse_tf.evaluation.config import EvaluationConfig
from dialoguecse_tf.evaluation.results_io import model_record, new_results
from dialoguecse_tf.evaluation.suite import EvaluationSuite
from dialoguecse_tf.evaluation.tables import write_results
from dialoguecse_tf.precision import check_precision
from dialoguecse_tf.records.source import corpus_texts
from dialoguecse_tf.serving.embed import read_texts


def build_suite(config: EvaluationConfig) -> EvaluationSuite:
    """Reads and validates every file of the config's suite (`DataFormatError` names file and line)."""
    options = {"dialogue_label": config.dialogue_label, "intent_split": config.intent_split,
               "finetune_preset": config.finetune_preset}
    return EvaluationSuite.from_entries(config.entries(), options)


def _corpus_sentences(path: str, text_format: str) -> list:
    files = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    if not files:
        raise FileNotFoundError(f"train_text_file {path!r} matches no file")
    return corpus_texts(dialogue for file in files for dialogue in read_corpus(file, text_format))


def read_train_texts(path: str, text_format: str = "lines") -> list[str]:
    """The distinct non-blank sentences of `path`, in first-appearance order.

    `text_format` "lines" reads one sentence per line; a corpus reader's name ("authors",
    "ecd", ...) takes every utterance of the corpus, and the candidate responses of the authors'
    format (utterances of other dialogues). Repeats are dropped because dialogue
    corpora repeat stock phrases ("好的", "谢谢") and overlapping training windows repeat whole
    utterances; left in, they would dominate the fitted mean and covariance.
    """
    texts = read_texts(path) if text_format == "lines" else _corpus_sentences(path, text_format)
    unique = [text for text in dict.fromkeys(texts) if text.strip()]
    if not unique:
        raise ValueError(f"{path}: no training sentence found")
    return unique


class _UnknownCounter:
    """The [UNK] share of the texts a checkpoint's rows embed, reported once per checkpoint."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.seen: set = set()
        self.unknown = self.pieces = 0
        self.reported = False

    def _count(self, texts) -> None:
        new = [text for text in texts if text not in self.seen]
        self.seen.update(new)
        unknown, pieces = self.tokenizer.count_unknown(new)
        self.unknown, self.pieces = self.unknown + unknown, self.pieces + pieces

    def wrap(self, embed_fn):
        def counted(texts):
            self._count(texts)
            return embed_fn(texts)
        return counted

    def wrap_dialogues(self, embed_fn):
        from dialoguecse_tf.encoder.dialogue import dialogue_turns

        def counted(dialogues):
            self._count([text for dialogue in dialogues for text in dialogue_turns(dialogue)[0]])
            return embed_fn(dialogues)
        return counted

    def report(self, name: str) -> None:
        if not self.reported and self.pieces:
            from dialoguecse_tf.encoder.tokenization import unknown_share

            logging.info("%s", unknown_share(self.unknown, self.pieces, self.tokenizer.vocab_file,
                                             f"the evaluation texts of {name}"))
            self.reported = True


def _encoder_factory(embedders):
    from dialoguecse_tf.evaluation.finetune import EncoderFactory

    return EncoderFactory(embedders.backbone, embedders.tokenizer)


def run_evaluation(config: EvaluationConfig) -> dict:
    """Evaluates every (checkpoint, baseline) row on every dataset.

    All inputs are read and checked before the first model loads, so a bad file fails in
    seconds. `results.json` / `results.md` in `config.output_dir` are rewritten after each row,
    so a long run shows its progress and keeps what it finished; each row's metrics are logged.
    A checkpoint row runs the fine-tuned tasks on fresh copies of its encoder; a baseline row
    reports them as not applicable (no metric; said in its description and `not_applicable`).

    Args:
      config: the models, baselines, evaluation suite and output folder.

    Returns:
      The results dict written to `results.json` (`results_io.new_results`, one record per row).
    """
    check_precision(config.precision)
    config.check_files()
    suite = build_suite(config)
    fine_tuned = suite.fine_tuned()
    if fine_tuned and config.precision == "float16":
        # As training refuses it for DSE: the release's AdamW does no loss scaling, which float16
        # gradients need; bfloat16 has float32's range and needs none.
        tasks = ", ".join(f"{name}: {label}" for name, labels in fine_tuned.items() for label in labels)
        raise ValueError(f"precision float16 cannot fine-tune ({tasks}): its optimizer does no loss scaling; use "
                         "float32 or bfloat16")
    train_texts = None
    if config.needs_train_texts:
        train_texts = read_train_texts(config.train_text_file, config.train_text_format)
        logging.info("%d distinct training sentences from %s", len(train_texts), config.train_text_file)
    # Imported only now: TensorFlow takes seconds to load, and a bad input file should not wait.
    from dialoguecse_tf.evaluation.baselines import CheckpointEmbedders, build_baseline, build_checkpoint_model

    results = new_results(config_to_dict(config), [dataset.record() for dataset in suite.datasets])
    options = config.fit_options()
    for (checkpoint, named_rows), protocol in zip(config.model_rows(), config.dialogue_protocols()):
        embedders = CheckpointEmbedders.from_checkpoint(checkpoint, config.max_seq_length, config.batch_size,
                                                        config.precision)
        unknown = _UnknownCounter(embedders.tokenizer)
        # The checkpoint's weights, copied before any row runs: every fine-tuning run starts from them.
        make_encoder = _encoder_factory(embedders) if fine_tuned else None
        for name, baseline in named_rows:
            start = time.perf_counter()
            built = (
                build_checkpoint_model(embedders, config.pooling)
                if baseline is None
                else build_baseline(baseline, embedders, train_texts, options)
            )
            dialogues, row_protocol = None, None
            if "dialogues" in suite.input_kinds:
                row_protocol = protocol
                dialogues = embedders.dialogues(protocol, config.dialogue_max_seq_length, config.pooling)
            # A baseline row is a fixed reading of the checkpoint's frozen vectors: no encoder of its own to fine-tune.
            metrics = suite(unknown.wrap(built.embed_fn), dialogues and unknown.wrap_dialogues(dialogues.embed_fn),
                            make_encoder if baseline is None else None)
            not_applicable = fine_tuned if baseline is not None else {}
            description = built.description + (f"; {dialogues.description}" if dialogues else "") + "".join(
                f"; {dataset} {', '.join(labels)}: not applicable (a baseline row has no encoder of its own to "
                "fine-tune)" for dataset, labels in not_applicable.items())
            results["models"].append(model_record(name, checkpoint, baseline, description, built.fit, metrics,
                                                  row_protocol, not_applicable))
            results["model_seconds"][name] = round(time.perf_counter() - start, 1)
            write_results(results, config.output_dir)
            summary = "; ".join(
                f"{dataset}: " + ", ".join(f"{key} {value:.2f}" for key, value in values.items())
                for dataset, values in metrics.items()
            )
            logging.info("%s (%.1fs): %s", name, results["model_seconds"][name], summary)
            unknown.report(name)
    logging.info("results in %s", os.path.join(config.output_dir, "results.json"))
    return results
