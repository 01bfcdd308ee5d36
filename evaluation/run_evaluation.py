"""Evaluates checkpoints and Table 2 baselines on SR (MAP, MRR) and D-STS (Spearman), on
DSE's few-shot intent classification and out-of-scope detection (accuracies), and on dial2vec's
dialogue-level tasks.

  python evaluation/run_evaluation.py --checkpoint=runs/dialoguecse/ckpt --model_name=DialogueCSE \
    --eval_task=ECD:sr:../shared/data/ecd/dev/select.txt --eval_task=ECD:dsts:../shared/data/ecd/dev/sts.txt \
    --output_dir=runs/eval/ecd

Each --eval_task is DATASET:TASK:PATH, TASK a registered task (--helpshort lists them);
--eval_suite=suite.json gives the same entries as a JSON list of
{"dataset", "task", "file"} objects (dialoguecse_tf/evaluation/suite.py). The per-dataset flags
of before still work, without those: repeat --dataset_name/--select_file/--sts_file/... once per
dataset, in order ('' for a missing file). Table 2's self-supervised rows for one corpus:

  --checkpoint=chinese_L-12_H-768_A-12,runs/pretrain/ckpt --model_name='BERT,BERT(adapt)' \
  --baselines=avg_token_embeddings,cls,avg,flow,whitening --train_text_file=sentences.txt

DSE's evaluations (Banking77, CLINC150 and its out-of-scope queries):

  --eval_task=Banking77:intent:../shared/data/intent/banking77 \
  --eval_task=CLINC150:intent:../shared/data/intent/clinc150/data_oos_plus.json \
  --eval_task=CLINC150:oos:../shared/data/intent/clinc150/data_oos_plus.json

dial2vec's dialogue-level evaluations (clustering, relatedness, retrieval) of SGD dev's
single-service dialogues, labelled by service, each checkpoint's row with its dialogue protocol
(plain_mean for an untouched encoder, utterance_mean for DialogueCSE, SiameseBERT and DSE,
utterance_token_mean for SimCSE, interlocutor for dial2vec; a packed dialogue, or under
utterance_token_mean an utterance, at most --dialogue_max_seq_length tokens, 512 by default as in
dial2vec's release):

  --eval_task=SGD-dev:clustering:../shared/data/sgd/dev --eval_task=SGD-dev:relatedness:../shared/data/sgd/dev \
  --eval_task=SGD-dev:dialogue_retrieval:../shared/data/sgd/dev \
  --checkpoint=MINILM,DSE_ENCODER,DIAL2VEC_ENCODER --dialogue_protocol=plain_mean,utterance_mean,interlocutor

Writes config.json, results.json and results.md into --output_dir.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_config_flags, run
from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.evaluation.config import EvaluationConfig

define_config_flags(flags, EvaluationConfig)
flags.DEFINE_alias("seed", "random_seed")
flags.mark_flags_as_required(["checkpoint", "output_dir"])
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
