"""Evaluates checkpoints and Table 2 baselines on SR (MAP, MRR) and D-STS (Spearman).

  python evaluation/run_evaluation.py --checkpoint=runs/dialoguecse/ckpt --model_name=DialogueCSE \
    --dataset_name=ECD --select_file=../shared/data/ecd/dev/select.txt \
    --sts_file=../shared/data/ecd/dev/sts.txt --output_dir=runs/eval/ecd

Several datasets: repeat --dataset_name/--select_file/--sts_file once per dataset, in order
('' for a missing file). Table 2's self-supervised rows for one corpus:

  --checkpoint=chinese_L-12_H-768_A-12,runs/pretrain/ckpt --model_name='BERT,BERT(adapt)' \
  --baselines=avg_token_embeddings,cls,avg,flow,whitening --train_text_file=sentences.txt

Writes config.json, results.json and results.md into --output_dir.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, run
from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.evaluation.config import POOLING_MODES, TRAIN_TEXT_FORMATS, EvaluationConfig, FlowConfig
from dialoguecse_tf.evaluation.registry import BASELINES

flags.DEFINE_list("checkpoint", None,
                  "Comma-separated checkpoints to evaluate: Google TF1 BERT, HuggingFace BERT or this project's.")
flags.DEFINE_list("model_name", [],
                  "Display name per checkpoint, same order (default: folder names). With --baselines each row is "
                  "named from it, e.g. BERT -> BERT-avg; BERT(adapt) for the MLM-pretrained checkpoint.")
flags.DEFINE_list("baselines", [],
                  "Baselines to apply to every checkpoint: " + ", ".join(BASELINES) + ". Empty: evaluate each "
                  "checkpoint as it is, with --pooling.")
flags.DEFINE_multi_string("dataset_name", [],
                          "Column name of a dataset (e.g. ECD, JDDC); repeat once per dataset. Optional with one "
                          "dataset (default 'dev').")
flags.DEFINE_multi_string("select_file", [],
                          "SR file (select.txt) of a dataset; repeat once per dataset, '' for none.")
flags.DEFINE_multi_string("sts_file", [],
                          "D-STS file (sts.txt) of a dataset; repeat once per dataset, '' for none.")
flags.DEFINE_string("train_text_file", None,
                    "Unlabelled in-domain sentences the whitening and flow baselines are fitted on (never the "
                    "evaluation files). Required by those baselines.")
flags.DEFINE_enum("train_text_format", "lines", list(TRAIN_TEXT_FORMATS),
                  "lines: one sentence per line; authors/mdc/ecd/jsonl: every utterance of a corpus in that format.")
flags.DEFINE_enum("pooling", "mean", list(POOLING_MODES),
                  "Pooling of checkpoints evaluated without --baselines (mean: the paper's).")
flags.DEFINE_integer("max_seq_length", 128, "Longer sentences are truncated (paper: 50 for ECD, 100 for JDDC).")
flags.DEFINE_integer("batch_size", 64, "Sentences per forward pass.")
flags.DEFINE_integer("whitening_dim", None, "Dimensions kept by BERT-whitening; unset keeps all.")
flags.DEFINE_integer("flow_couplings", FlowConfig.num_couplings, "BERT-flow: ActNorm + affine coupling blocks.")
flags.DEFINE_integer("flow_hidden_units", FlowConfig.hidden_units, "BERT-flow: width of each coupling's MLP.")
flags.DEFINE_integer("flow_steps", FlowConfig.steps, "BERT-flow: Adam steps of maximum-likelihood training.")
flags.DEFINE_integer("flow_batch_size", FlowConfig.batch_size, "BERT-flow: training batch size.")
flags.DEFINE_float("flow_learning_rate", FlowConfig.learning_rate, "BERT-flow: Adam learning rate.")
flags.DEFINE_integer("random_seed", FlowConfig.seed, "Seed of the flow's initialisation and batch order.")
flags.DEFINE_alias("seed", "random_seed")
flags.DEFINE_string("output_dir", None, "Where config.json, results.json and results.md are written.")
flags.mark_flags_as_required(["checkpoint", "output_dir"])
flags.register_multi_flags_validator(
    ["select_file", "sts_file"],
    lambda values: bool(values["select_file"] or values["sts_file"]),
    message="give at least one --select_file (SR) or --sts_file (D-STS)",
)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    config = config_from_flags(EvaluationConfig, FLAGS)
    config.check_files()
    write_config(config, config.output_dir)
    # Imported only now: the evaluation modules take seconds to load, and a bad command line should not wait.
    from dialoguecse_tf.evaluation.runner import run_evaluation

    run_evaluation(config)


if __name__ == "__main__":
    run(main)
