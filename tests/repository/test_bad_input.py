"""Bad input on every entry point: one clear line on stderr, a failing exit code, no complete-looking output.

Each case runs the real entry point in a process of its own. All cases are launched once, a few
at a time, by the module-scoped `outcomes` fixture, as children forked from one process that
imported TensorFlow (tests/forked_entry_points.py: a fresh interpreter per case paid seconds of
imports, minutes in all); the parametrized tests then check one case each.

What counts as complete-looking output: anything in the case's output folder except a
`config.json` at its top level. A stage that writes its config before loading a model (training,
evaluation) leaves the config of the attempted run; without results, records, an `encoder/`
folder or a SavedModel beside it nothing suggests that the run finished.
"""

import dataclasses
import json
import os
import shutil

import pytest

from conftest import REPO_ROOT, tiny_bert_config_for, write_tiny_vocab
from forked_entry_points import run_entry_points
from intent_corpus import write_corpus

# Runs the entry points as subprocesses (CI runs them; deselect with -m "not slow").
pytestmark = pytest.mark.slow

ENV = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
EMBED = "dialoguecse-embed"
EXPERIMENT = "dialoguecse-experiment"
_INSTALLED = {EMBED: "dialoguecse_tf.cli.embed", EXPERIMENT: "dialoguecse_tf.cli.experiment"}
WORKERS = 2


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad command line; `args` and `culprit` are formatted with the input paths and `{out}`."""

    entry_point: str  # a script path relative to the repository root, or an installed command
    name: str
    args: tuple
    culprit: str  # what the error line must name: a path (with ":line"), a flag or a key
    stdin: bytes = b""

    @property
    def id(self) -> str:
        return f"{os.path.splitext(os.path.basename(self.entry_point))[0]}-{self.name}"


VOCAB = "data_prep/build_vocab.py"
MLM_DATA = "data_prep/create_pretraining_data.py"
CONTRASTIVE_DATA = "data_prep/create_contrastive_data.py"
SR_SET = "data_prep/build_sr_set.py"
RS_SETS = "data_prep/build_rs_sets.py"
DEMO = "data_prep/generate_demo_corpus.py"
PRETRAIN = "pretrain/run_pretraining.py"
FINETUNE = "finetune/run_finetuning.py"
TRAIN = "train/run_training.py"
EXPORT = "export/export_savedmodel.py"
EVALUATE = "evaluation/run_evaluation.py"
MERGE = "evaluation/merge_results.py"
SWEEP = "evaluation/plot_sweep.py"
FINDINGS = "evaluation/write_findings.py"
PAIR_DATA = "data_prep/create_pair_data.py"
DIALOGUE_DATA = "data_prep/create_dialogue_data.py"
CANONICALIZE = "data_prep/canonicalize_records.py"
SPLIT = "data_prep/split_corpus.py"
PLOT_LOGS = "evaluation/plot_train_logs.py"
EXPORT_ENCODER = "export/export_encoder.py"
# The stage folders' scripts are the entry points: every .py there with an absl main.
ENTRY_POINT_FOLDERS = ("data_prep", "pretrain", "finetune", "train", "evaluation", "export")


def discover_entry_points() -> set:
    found = set(_INSTALLED)
    for folder in ENTRY_POINT_FOLDERS:
        for name in sorted(os.listdir(REPO_ROOT / folder)):
            path = REPO_ROOT / folder / name
            if name.endswith(".py") and "run(main" in path.read_text(encoding="utf-8"):
                found.add(f"{folder}/{name}")
    return found


PRETRAIN_ARGS = ("--output_dir={out}", "--max_seq_length=16", "--max_predictions_per_seq=3", "--num_train_steps=2",
                 "--train_batch_size=2")
FINETUNE_ARGS = ("--output_dir={out}", "--max_seq_length=16", "--num_negatives=2", "--num_train_steps=2",
                 "--train_batch_size=2", "--num_frozen_layers=1")
EVAL_ARGS = ("--output_dir={out}", "--max_seq_length=16")

CASES = (
    Case(PAIR_DATA, "missing_flag", ("--input_file={corpus}", "--output_dir={out}"), "--vocab_file"),
    Case(PAIR_DATA, "missing_input", ("--input_file={missing}", "--output_dir={out}", "--vocab_file={vocab}"),
         "{missing}"),
    Case(PAIR_DATA, "malformed_line", ("--input_file={bad_jsonl}", "--output_dir={out}", "--vocab_file={vocab}"),
         "{bad_jsonl}:3"),
    Case(DIALOGUE_DATA, "missing_flag", ("--input_file={corpus}", "--output_dir={out}"), "--vocab_file"),
    Case(DIALOGUE_DATA, "missing_input", ("--input_file={missing}", "--output_dir={out}", "--vocab_file={vocab}"),
         "{missing}"),
    Case(DIALOGUE_DATA, "vocab_invalid_utf8", ("--input_file={corpus}", "--output_dir={out}",
                                               "--vocab_file={vocab_bad_utf8}"), "{vocab_bad_utf8}"),
    Case(CANONICALIZE, "missing_flag", (), "--records"),
    Case(CANONICALIZE, "no_matching_file", ("--records={missing}",), "{missing}"),
    Case(PLOT_LOGS, "missing_flag", ("--output_dir={out}",), "--log"),
    Case(PLOT_LOGS, "missing_log", ("--log=run={missing}", "--output_dir={out}"), "{missing}"),
    Case(PLOT_LOGS, "log_not_json_lines", ("--log=run={not_json}", "--output_dir={out}"), "{not_json}:1"),
    Case(EXPORT_ENCODER, "missing_flag", ("--checkpoint={ckpt}",), "--output_dir"),
    Case(EXPORT_ENCODER, "missing_checkpoint", ("--checkpoint={missing}", "--output_dir={out}"), "{missing}"),
    Case(EXPORT_ENCODER, "truncated_weights", ("--checkpoint={ckpt_truncated}", "--output_dir={out}"),
         "{ckpt_truncated}"),
    Case(EXPERIMENT, "missing_flag", (), "usage: dialoguecse-experiment"),
    Case(EXPERIMENT, "unknown_experiment", ("run", "ecd_cpus", "--dry_run"), "unknown experiment 'ecd_cpus'"),
    Case(EXPERIMENT, "unknown_parameter", ("run", "demo", "--dry_run", "--set=steps=3"), "has no parameter steps"),
    Case(EXPERIMENT, "missing_experiment_file", ("run", "{missing}.yaml", "--dry_run"), "{missing}.yaml"),
    Case(VOCAB, "missing_flag", ("--input_file={corpus}",), "--output_dir"),
    Case(VOCAB, "missing_input", ("--input_file={missing}", "--output_dir={out}"), "{missing}"),
    Case(VOCAB, "empty_input", ("--input_file={empty}", "--output_dir={out}"), "{empty}"),
    Case(VOCAB, "malformed_line", ("--input_file={bad_jsonl}", "--output_dir={out}"), "{bad_jsonl}:3"),
    Case(VOCAB, "invalid_utf8", ("--input_file={bad_utf8_jsonl}", "--output_dir={out}"), "{bad_utf8_jsonl}:2"),
    Case(MLM_DATA, "missing_flag", ("--input_file={corpus}", "--output_dir={out}"), "--vocab_file"),
    Case(MLM_DATA, "missing_vocab", ("--input_file={corpus}", "--output_dir={out}", "--vocab_file={missing}"),
         "{missing}"),
    Case(MLM_DATA, "vocab_invalid_utf8",
         ("--input_file={corpus}", "--output_dir={out}", "--vocab_file={vocab_bad_utf8}"), "{vocab_bad_utf8}:6"),
    Case(CONTRASTIVE_DATA, "missing_flag", ("--input_file={corpus}", "--vocab_file={vocab}"), "--output_dir"),
    Case(CONTRASTIVE_DATA, "vocab_without_special_tokens",
         ("--input_file={corpus}", "--output_dir={out}", "--vocab_file={vocab_no_mask}"), "{vocab_no_mask}"),
    Case(CONTRASTIVE_DATA, "output_dir_is_a_file",
         ("--input_file={corpus}", "--output_dir={a_file}", "--vocab_file={vocab}"), "{a_file}"),
    Case(CONTRASTIVE_DATA, "wrong_field_count",
         ("--input_file={bad_authors}", "--input_format=authors", "--output_dir={out}", "--vocab_file={vocab}"),
         "{bad_authors}:2"),
    Case(SR_SET, "missing_flag", ("--input_file={corpus}",), "--output_file"),
    Case(SR_SET, "no_intents", ("--input_file={no_intents}", "--output_file={out}/select.txt"), "{no_intents}"),
    Case(SR_SET, "bad_mdc_header", ("--input_file={bad_mdc}", "--input_format=mdc", "--output_file={out}/select.txt"),
         "{bad_mdc}:1"),
    Case(SR_SET, "sgd_unknown_speaker", ("--input_file={bad_sgd}", "--input_format=sgd",
                                         "--output_file={out}/select.txt"), "{bad_sgd}:1: dialogue 1 ('1_00000')"),
    Case(RS_SETS, "missing_flag", ("--input_file={corpus}",), "--output_dir"),
    Case(RS_SETS, "missing_input", ("--input_file={missing}", "--output_dir={out}"), "{missing}"),
    Case(RS_SETS, "malformed_line", ("--input_file={bad_jsonl}", "--output_dir={out}"), "{bad_jsonl}:3"),
    Case(RS_SETS, "no_responding_speaker", ("--input_file={corpus}", "--output_dir={out}"), "--response_speaker"),
    Case(SPLIT, "missing_flag", ("--input_file={corpus}",), "--output_dir"),
    Case(SPLIT, "missing_input", ("--input_file={missing}", "--output_dir={out}"), "{missing}"),
    Case(SPLIT, "malformed_line", ("--input_file={bad_jsonl}", "--output_dir={out}"), "{bad_jsonl}:3"),
    Case(SPLIT, "bad_self_dialogue_header", ("--input_file={bad_self_dialogue}", "--input_format=self_dialogue",
                                             "--output_dir={out}"), "{bad_self_dialogue}:1"),
    Case(SPLIT, "no_test_share", ("--input_file={corpus}", "--output_dir={out}", "--train_percent=90"),
         "leave test a share"),
    Case(DEMO, "missing_flag", (), "--output_dir"),
    Case(DEMO, "output_dir_is_a_file", ("--output_dir={a_file}", "--num_dialogues=5", "--num_eval_dialogues=5"),
         "{a_file}"),
    Case(DEMO, "bad_sr_candidates", ("--output_dir={out}", "--num_dialogues=5", "--num_sr_candidates=0"),
         "num_sr_candidates"),
    # --input_file is pretraining's alias of --train_file; absl names the flag itself.
    Case(PRETRAIN, "missing_flag", ("--output_dir={out}",), "--train_file"),
    Case(PRETRAIN, "no_records", ("--input_file={missing}", "--bert_config_file={bert_config}",
                                  "--vocab_file={vocab}") + PRETRAIN_ARGS, "{missing}"),
    Case(PRETRAIN, "truncated_records", ("--input_file={mlm_truncated}/*.tfrecord", "--bert_config_file={bert_config}",
                                         "--vocab_file={vocab}") + PRETRAIN_ARGS, "{mlm_truncated}/mlm-00000-of-00002"),
    Case(PRETRAIN, "corrupt_records", ("--input_file={mlm_corrupt}/*.tfrecord", "--bert_config_file={bert_config}",
                                       "--vocab_file={vocab}") + PRETRAIN_ARGS, "{mlm_corrupt}/mlm-00001-of-00002"),
    Case(PRETRAIN, "records_info_corrupt", ("--input_file={mlm_bad_info}/*.tfrecord",
                                            "--bert_config_file={bert_config}", "--vocab_file={vocab}") + PRETRAIN_ARGS,
         "{mlm_bad_info}/records_info.json"),
    Case(PRETRAIN, "contrastive_records", ("--input_file={contrastive}/*.tfrecord", "--bert_config_file={bert_config}",
                                           "--vocab_file={vocab}") + PRETRAIN_ARGS, "{contrastive}/records_info.json"),
    Case(PRETRAIN, "config_missing_keys", ("--input_file={mlm}/*.tfrecord", "--bert_config_file={config_no_hidden}",
                                           "--vocab_file={vocab}") + PRETRAIN_ARGS, "hidden_size"),
    Case(PRETRAIN, "config_vocab_size_differs", ("--input_file={mlm}/*.tfrecord", "--bert_config_file={bert_config}",
                                                 "--vocab_file={vocab_bigger}") + PRETRAIN_ARGS, "{vocab_bigger}"),
    Case(PRETRAIN, "checkpoint_vocab_size_differs",
         ("--input_file={mlm}/*.tfrecord", "--init_checkpoint={ckpt_vocab_differs}") + PRETRAIN_ARGS,
         "{ckpt_vocab_differs}/vocab.txt"),
    Case(FINETUNE, "missing_flag", ("--output_dir={out}",), "--train_file"),
    Case(FINETUNE, "truncated_records", ("--train_file={contrastive_truncated}/*.tfrecord", "--init_checkpoint={ckpt}")
         + FINETUNE_ARGS, "{contrastive_truncated}/contrastive-00000-of-00001"),
    Case(FINETUNE, "checkpoint_vocab_size_differs",
         ("--train_file={contrastive}/*.tfrecord", "--init_checkpoint={ckpt_vocab_differs}") + FINETUNE_ARGS,
         "{ckpt_vocab_differs}/vocab.txt"),
    Case(FINETUNE, "checkpoint_config_missing_keys",
         ("--train_file={contrastive}/*.tfrecord", "--init_checkpoint={ckpt_no_hidden}") + FINETUNE_ARGS,
         "{ckpt_no_hidden}/bert_config.json"),
    Case(FINETUNE, "select_id_out_of_range", ("--train_file={contrastive}/*.tfrecord", "--init_checkpoint={ckpt}",
                                              "--eval_select_file={select_out_of_range}") + FINETUNE_ARGS,
         "{select_out_of_range}:3"),
    Case(FINETUNE, "not_a_contrastive_objective", ("--train_file={contrastive}/*.tfrecord", "--init_checkpoint={ckpt}",
                                                   "--model_type=mlm") + FINETUNE_ARGS, "--objective"),
    Case(TRAIN, "missing_flag", ("--output_dir={out}", "--objective=mlm"), "--train_file"),
    Case(TRAIN, "no_objective", ("--train_file={mlm}/*.tfrecord", "--bert_config_file={bert_config}",
                                 "--vocab_file={vocab}") + PRETRAIN_ARGS, "--objective"),
    Case(TRAIN, "unknown_objective", ("--train_file={mlm}/*.tfrecord", "--objective=no_such_objective",
                                      "--bert_config_file={bert_config}", "--vocab_file={vocab}") + PRETRAIN_ARGS,
         "--objective"),
    Case(TRAIN, "records_of_another_objective", ("--train_file={contrastive}/*.tfrecord", "--objective=mlm",
                                                 "--bert_config_file={bert_config}", "--vocab_file={vocab}")
         + PRETRAIN_ARGS, "{contrastive}/records_info.json"),
    Case(TRAIN, "too_few_negatives", ("--train_file={contrastive}/*.tfrecord", "--objective=siamese_m",
                                      "--init_checkpoint={ckpt}", "--num_negatives=9", "--output_dir={out}",
                                      "--max_seq_length=16", "--num_train_steps=2", "--train_batch_size=2"),
         "{contrastive}/records_info.json"),
    # The 2-layer checkpoint with both layers frozen: nothing of the encoder would train.
    Case(TRAIN, "every_layer_frozen", ("--train_file={contrastive}/*.tfrecord", "--objective=siamese_m",
                                       "--init_checkpoint={ckpt}", "--num_negatives=2", "--num_frozen_layers=2",
                                       "--output_dir={out}", "--max_seq_length=16", "--num_train_steps=2",
                                       "--train_batch_size=2"), "--num_frozen_layers=1"),
    Case(TRAIN, "eval_suite_unknown_key", ("--train_file={mlm}/*.tfrecord", "--objective=mlm",
                                           "--bert_config_file={bert_config}", "--vocab_file={vocab}",
                                           "--eval_suite={suite_unknown_key}") + PRETRAIN_ARGS,
         "{suite_unknown_key}: entry 1: unknown keys ['split']"),
    Case(EXPORT, "missing_flag", ("--checkpoint={ckpt}",), "--export_dir"),
    Case(EXPORT, "missing_checkpoint", ("--checkpoint={missing}", "--export_dir={out}"), "{missing}"),
    Case(EXPORT, "checkpoint_vocab_size_differs", ("--checkpoint={ckpt_vocab_differs}", "--export_dir={out}"),
         "{ckpt_vocab_differs}/vocab.txt"),
    Case(EXPORT, "truncated_weights", ("--checkpoint={ckpt_truncated}", "--export_dir={out}"), "{ckpt_truncated}"),
    Case(EXPORT, "export_dir_is_a_file", ("--checkpoint={ckpt}", "--export_dir={a_file}", "--max_seq_length=16"),
         "{a_file}"),
    Case(EVALUATE, "missing_flag", ("--sts_file={sts}", "--output_dir={out}"), "--checkpoint"),
    Case(EVALUATE, "missing_select_file", ("--checkpoint={ckpt}", "--select_file={missing}") + EVAL_ARGS, "{missing}"),
    Case(EVALUATE, "empty_select_file", ("--checkpoint={ckpt}", "--select_file={empty}") + EVAL_ARGS, "{empty}:1"),
    Case(EVALUATE, "select_id_out_of_range", ("--checkpoint={ckpt}", "--select_file={select_out_of_range}")
         + EVAL_ARGS, "{select_out_of_range}:3"),
    Case(EVALUATE, "select_without_negatives", ("--checkpoint={ckpt}", "--select_file={select_no_negatives}")
         + EVAL_ARGS, "{select_no_negatives}"),
    Case(EVALUATE, "rs_dialogue_candidate_count", ("--checkpoint={ckpt}", "--eval_task=X:rs_dialogue:{rs_bad}")
         + EVAL_ARGS, "{rs_bad}:2"),
    Case(EVALUATE, "bad_sts_score", ("--checkpoint={ckpt}", "--sts_file={sts_bad_score}") + EVAL_ARGS,
         "{sts_bad_score}:2"),
    Case(EVALUATE, "checkpoint_vocab_size_differs", ("--checkpoint={ckpt_vocab_differs}", "--sts_file={sts}")
         + EVAL_ARGS, "{ckpt_vocab_differs}/vocab.txt"),
    Case(EVALUATE, "checkpoint_config_missing_keys", ("--checkpoint={ckpt_no_hidden}", "--sts_file={sts}")
         + EVAL_ARGS, "{ckpt_no_hidden}/bert_config.json"),
    Case(EVALUATE, "eval_task_without_path", ("--checkpoint={ckpt}", "--eval_task=ECD:sr") + EVAL_ARGS,
         "evaluation task 'ECD:sr': expected DATASET:TASK:PATH"),
    Case(EVALUATE, "eval_task_unknown_task", ("--checkpoint={ckpt}", "--eval_task=ECD:select:{sts}") + EVAL_ARGS,
         "unknown evaluation task 'select'"),
    Case(EVALUATE, "eval_task_missing_file", ("--checkpoint={ckpt}", "--eval_task=ECD:dsts:{missing}") + EVAL_ARGS,
         "dsts file of dataset 'ECD' not found: {missing}"),
    Case(EVALUATE, "eval_task_and_per_dataset_flags", ("--checkpoint={ckpt}", "--eval_task=ECD:dsts:{sts}",
                                                        "--select_file={sts}") + EVAL_ARGS, "(select_file), not both"),
    Case(EVALUATE, "eval_suite_unknown_key", ("--checkpoint={ckpt}", "--eval_suite={suite_unknown_key}") + EVAL_ARGS,
         "{suite_unknown_key}: entry 1: unknown keys ['split']"),
    Case(EVALUATE, "train_text_invalid_utf8", ("--checkpoint={ckpt}", "--sts_file={sts}", "--baselines=whitening",
                                               "--train_text_file={texts_bad_utf8}") + EVAL_ARGS, "{texts_bad_utf8}:2"),
    Case(MERGE, "missing_flag", ("--results={results}",), "--output_dir"),
    Case(MERGE, "missing_results", ("--results={missing}", "--output_dir={out}"), "{missing}"),
    Case(MERGE, "empty_results", ("--results={empty}", "--output_dir={out}"), "{empty}"),
    Case(MERGE, "results_not_json", ("--results={not_json}", "--output_dir={out}"), "{not_json}"),
    Case(MERGE, "results_missing_keys", ("--results={results_no_name}", "--output_dir={out}"), "{results_no_name}"),
    Case(FINDINGS, "missing_flag", ("--table={table}", "--output_dir={out}"), "--claims"),
    Case(FINDINGS, "missing_table", ("--table={missing}", "--claims={claims}", "--output_dir={out}"), "{missing}"),
    Case(FINDINGS, "table_not_a_table", ("--table={results}", "--claims={claims}", "--output_dir={out}"),
         "{results}"),
    Case(FINDINGS, "claim_without_row", ("--table={table}", "--claims={claims_no_row}", "--output_dir={out}"),
         "{claims_no_row}"),
    Case(SWEEP, "missing_flag", ("--parameter=t", "--output_dir={out}"), "--point"),
    Case(SWEEP, "point_without_value", ("--parameter=t", "--point={results}", "--output_dir={out}"), "{results}"),
    Case(SWEEP, "missing_results", ("--parameter=t", "--point=0.1={missing}", "--output_dir={out}"), "{missing}"),
    Case(SWEEP, "results_missing_keys", ("--parameter=t", "--point=0.1={results_no_name}", "--output_dir={out}",
                                         "--noplot"), "{results_no_name}"),
    Case(EMBED, "missing_flag", ("--checkpoint={ckpt}",), "--output_file"),
    Case(EMBED, "missing_checkpoint", ("--checkpoint={missing}", "--input_file={texts}",
                                       "--output_file={out}/vectors.npy"), "{missing}"),
    Case(EMBED, "missing_input", ("--checkpoint={ckpt}", "--input_file={missing}", "--output_file={out}/vectors.npy"),
         "{missing}"),
    Case(EMBED, "empty_input", ("--checkpoint={ckpt}", "--input_file={empty}", "--output_file={out}/vectors.npy"),
         "{empty}"),
    Case(EMBED, "stdin_invalid_utf8", ("--checkpoint={ckpt}", "--output_file={out}/vectors.npy"), "<stdin>:2",
         stdin=b"hello\nbad \xff text\n"),
    Case(EMBED, "bad_output_extension", ("--checkpoint={ckpt}", "--input_file={texts}",
                                         "--output_file={out}/vectors.txt"), "{out}/vectors.txt"),
    Case(EMBED, "checkpoint_vocab_size_differs", ("--checkpoint={ckpt_vocab_differs}", "--input_file={texts}",
                                                  "--output_file={out}/vectors.npy"), "{ckpt_vocab_differs}/vocab.txt"),
    Case(EMBED, "output_file_under_a_file", ("--checkpoint={missing}", "--input_file={texts}",
                                             "--output_file={a_file}/vectors.npy"), "{a_file}/vectors.npy"),
    Case(EMBED, "only_blank_lines", ("--checkpoint={ckpt}", "--input_file={blank_texts}",
                                     "--output_file={out}/vectors.npy"), "{blank_texts}"),
    Case(EMBED, "export_other_pooling", ("--export_dir={fake_export}", "--input_file={texts}", "--pooling=cls",
                                         "--output_file={out}/vectors.npy"), "pooling='cls'"),
    Case(EMBED, "export_other_max_seq_length", ("--export_dir={fake_export}", "--input_file={texts}",
                                                "--max_seq_length=8", "--output_file={out}/vectors.npy"),
         "max_seq_length=8"),
    Case(EMBED, "no_saved_model", ("--export_dir={empty_dir}", "--input_file={texts}",
                                   "--output_file={out}/vectors.npy"), "{empty_dir}"),
)


def _truncate(path, keep_fraction):
    with open(path, "r+b") as handle:
        handle.truncate(int(os.path.getsize(path) * keep_fraction))


def _flip_byte(path, offset):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))


def _copy_folder(source, target, replace=None):
    """Copies `source` to `target`, then overwrites the files named in `replace` with its bytes."""
    shutil.copytree(source, target)
    for name, content in (replace or {}).items():
        with open(os.path.join(target, name), "wb") as handle:
            handle.write(content)
    return str(target)


def _build_inputs(root):
    """Every input the cases need, good and bad, under `root`; returns {placeholder: path}."""
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import save_checkpoint
    from dialoguecse_tf.encoder.tokenization import Tokenizer
    from dialoguecse_tf.prep import CorpusConfig, RecordsConfig, run_create_records
    from dialoguecse_tf.records.contrastive import ContrastiveSettings
    from dialoguecse_tf.records.mlm import MlmSettings

    paths = {"missing": str(root / "does-not-exist"), "empty": str(root / "empty.txt"),
             "empty_dir": str(root / "empty_dir"), "a_file": str(root / "a_file.txt")}
    os.makedirs(paths["empty_dir"])
    paths["fake_export"] = str(root / "fake_export")
    os.makedirs(root / "fake_export" / "1")
    (root / "fake_export" / "1" / "saved_model.pb").write_bytes(b"")
    (root / "empty.txt").write_bytes(b"")
    (root / "a_file.txt").write_text("not a folder\n")

    def write(name, content):
        path = root / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return str(path)

    vocab = write_tiny_vocab(root / "vocab.txt")
    vocab_text = open(vocab, encoding="utf-8").read()
    vocab_bigger = (vocab_text + "extra\n").encode()
    paths.update(
        vocab=vocab,
        vocab_bigger=write("vocab_bigger.txt", vocab_bigger),
        vocab_no_mask=write("vocab_no_mask.txt", vocab_text.replace("[MASK]\n", "")),
        vocab_bad_utf8=write("vocab_bad_utf8.txt", vocab_text.encode("utf-8").replace(b"the\n", b"th\xe9\n")),
    )
    corpus = write_corpus(root / "corpus.jsonl")
    good_lines = open(corpus, encoding="utf-8").read().splitlines(keepends=True)
    paths.update(
        corpus=corpus,
        bad_jsonl=write("bad.jsonl", "".join(good_lines[:2]) + "{not json\n"),
        bad_utf8_jsonl=write("bad_utf8.jsonl", good_lines[0].encode() + b'{"turns": "\xff"}\n'),
        no_intents=write("no_intents.jsonl", "".join(line.replace('"intent": "', '"topic": "') for line in good_lines)),
        bad_authors=write("bad_authors.txt", "a|b\tc\t0|1-0-1\t1\tx|y\t1|0\na|b\tc\t0|1-0-1\t1\tx|y\n"),
        bad_mdc=write("bad_mdc.tsv", "session.ID\tMessage.ID\tFrom\ttext\n1\t1\tuser\thi\n"),
        bad_self_dialogue=write("bad_self_dialogue.csv", "AssignmentId,WorkerId,Answer.sentence1\nA1,W1,hi\n"),
        bad_sgd=write("dialogues_001.json", json.dumps([{"dialogue_id": "1_00000", "services": ["Hotels_1"], "turns": [
            {"speaker": "BOT", "utterance": "hi", "frames": [{"actions": [{"act": "INFORM"}]}]}]}])),
        rs_bad=write("rs_dialogue.txt", "".join(f"context\tanswer\t{'|'.join(['c'] * count)}\n" for count in (100, 99))),
        texts=write("texts.txt", "where is my order\ni want a refund\n"),
        blank_texts=write("blank_texts.txt", "\n \n\t\n"),
        # What the embed CLI reads of an export before loading it: the version folder and its config.
        fake_export_config=write("fake_export/1/export_config.json",
                                 json.dumps({"max_seq_length": 16, "pooling": "mean"})),
        texts_bad_utf8=write("texts_bad_utf8.txt", b"where is my order\nbad \xfe\n"),
        # Line 3 names row 99 of a 4-row file.
        select_out_of_range=write("select_out_of_range.txt", "0\twhere is my order\t0\t1\t2,3\n"
                                  "1\ttrack my package\t0\t0\t2\n2\ti want a refund\t1\t3,99\t0\n"
                                  "3\tmoney back please\t1\t2\t0,1\n"),
        select_no_negatives=write("select_no_negatives.txt", "0\twhere is my order\t0\t1\t\n"
                                  "1\ttrack my package\t0\t0\t\n"),
        sts=write("sts.txt", "5\twhere is my order\ttrack my package\n1\ti want a refund\ttrack my package\n"),
        sts_bad_score=write("sts_bad_score.txt", "5\twhere is my order\ttrack my package\n7\ta\tb\n"),
    )
    paths["suite_unknown_key"] = write("suite_unknown_key.json", json.dumps(
        [{"dataset": "ECD", "task": "dsts", "file": paths["sts"]},
         {"dataset": "ECD", "task": "sr", "file": paths["sts"], "split": "dev"}]))

    config = tiny_bert_config_for(vocab)
    config.to_json_file(str(root / "bert_config.json"))
    config_values = config.to_dict()
    del config_values["hidden_size"]
    config_no_hidden = json.dumps(config_values).encode()
    paths.update(bert_config=str(root / "bert_config.json"), config_no_hidden=write("no_hidden.json", config_no_hidden))

    ckpt = save_checkpoint(str(root / "ckpt"), build_backbone(config), config, Tokenizer(vocab, max_seq_length=16))
    paths.update(
        ckpt=ckpt,
        ckpt_vocab_differs=_copy_folder(ckpt, root / "ckpt_vocab_differs", {"vocab.txt": vocab_bigger}),
        ckpt_no_hidden=_copy_folder(ckpt, root / "ckpt_no_hidden", {"bert_config.json": config_no_hidden}),
        ckpt_truncated=_copy_folder(ckpt, root / "ckpt_truncated"),
    )
    _truncate(os.path.join(paths["ckpt_truncated"], "bert_model.ckpt.data-00000-of-00001"), 0.5)

    corpus_config = CorpusConfig(input_file=(corpus,))
    run_create_records(RecordsConfig(corpus_config, str(root / "mlm"), vocab, settings=MlmSettings(
        max_seq_length=16, max_predictions_per_seq=3, num_shards=2)))
    run_create_records(RecordsConfig(corpus_config, str(root / "contrastive"), vocab, settings=ContrastiveSettings(
        max_seq_length=16, num_negatives=2)))
    mlm, contrastive = str(root / "mlm"), str(root / "contrastive")
    paths.update(
        mlm=mlm, contrastive=contrastive,
        mlm_truncated=_copy_folder(mlm, root / "mlm_truncated"),
        mlm_corrupt=_copy_folder(mlm, root / "mlm_corrupt"),
        mlm_bad_info=_copy_folder(mlm, root / "mlm_bad_info", {"records_info.json": b'{"record_type": "mlm", '}),
        contrastive_truncated=_copy_folder(contrastive, root / "contrastive_truncated"),
    )
    _truncate(os.path.join(paths["mlm_truncated"], "mlm-00000-of-00002.tfrecord"), 0.6)
    _flip_byte(os.path.join(paths["mlm_corrupt"], "mlm-00001-of-00002.tfrecord"), 40)
    _truncate(os.path.join(paths["contrastive_truncated"], "contrastive-00000-of-00001.tfrecord"), 0.7)

    no_name = {"format_version": 1, "config": {}, "datasets": [{"name": "dev"}],
               "models": [{"checkpoint": ckpt, "description": "d", "metrics": {}}]}
    paths.update(
        results=write("results.json", json.dumps({"format_version": 1, "datasets": [], "models": []})),
        results_no_name=write("results_no_name.json", json.dumps(no_name)),
        not_json=write("not_json.json", "{format_version: 1"),
        table=write("table.json", json.dumps({"datasets": [], "rows": [], "columns": [], "best": {}})),
        claims=write("claims.yaml", "claims:\n  - {paper: P, ordering: A over B, row: A, over: [B], columns: [X:map]}\n"),
        claims_no_row=write("claims_no_row.yaml", "claims:\n  - {paper: P, ordering: A over B, over: [B], "
                            "columns: [X:map]}\n"),
    )
    return paths


def _command(case, paths, out) -> list:
    values = {**paths, "out": out}
    args = [arg.format(**values) for arg in case.args]
    # `-m dialoguecse_tf.cli.embed` calls `run()`, the console script's entry point.
    return (["-m", _INSTALLED[case.entry_point]] if case.entry_point in _INSTALLED
            else [str(REPO_ROOT / case.entry_point)]) + args


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return _build_inputs(tmp_path_factory.mktemp("bad_input"))


@pytest.fixture(scope="module")
def outcomes(inputs, tmp_path_factory):
    """{case id: (CompletedProcess, output folder)} for every case, run WORKERS at a time."""
    out_root = tmp_path_factory.mktemp("outputs")
    commands = [(_command(case, inputs, str(out_root / case.id)), case.stdin) for case in CASES]
    completed = run_entry_points(commands, tmp_path_factory.mktemp("streams"), WORKERS, ENV, REPO_ROOT)
    return {case.id: (process, str(out_root / case.id)) for case, process in zip(CASES, completed)}


def _complete_looking(out):
    """Files under `out` other than its top-level config.json."""
    found = []
    for folder, _, files in os.walk(out):
        found += [os.path.join(folder, name) for name in files
                  if not (folder == out and name == "config.json")]
    return found


def test_every_entry_point_has_cases():
    names = {case.entry_point: set() for case in CASES}
    for case in CASES:
        names[case.entry_point].add(case.name)
    assert set(names) == discover_entry_points()
    assert all("missing_flag" in cases for cases in names.values())
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_fails_in_one_clear_line(case, inputs, outcomes):
    completed, out = outcomes[case.id]
    stderr = completed.stderr.decode("utf-8", errors="replace")
    assert completed.returncode != 0, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-4000:]
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith("error: "), stderr[-2000:]
    assert case.culprit.format(**inputs, out=out) in last_line, stderr[-2000:]
    assert not _complete_looking(out)
    assert open(inputs["a_file"]).read() == "not a folder\n"
