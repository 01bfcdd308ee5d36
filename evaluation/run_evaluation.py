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

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_config_flags, run
from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.evaluation.config import EvaluationConfig

define_config_flags(flags, EvaluationConfig)
flags.DEFINE_alias("seed", "random_seed")
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
