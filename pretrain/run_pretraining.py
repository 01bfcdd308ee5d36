"""MLM continued pretraining of BERT on dialogue TFRecords (paper, section 5.3).

Flags follow Google BERT's run_pretraining.py. Starts from `init_checkpoint` (Google TF1,
HuggingFace or this project's checkpoint) or from scratch (`bert_config_file` + `vocab_file`).
A killed run restarted with the same command resumes from its last checkpoint.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_training_flags, run
from dialoguecse_tf.pretraining import PretrainConfig, run_pretraining

flags.DEFINE_multi_string("input_file", None, "MLM TFRecord file or glob (data_prep/create_pretraining_data.py).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json for training from scratch.")
flags.DEFINE_string("vocab_file", None, "vocab.txt; with init_checkpoint, overrides the checkpoint's own.")
flags.DEFINE_bool("do_lower_case", True, "Lower-casing of the tokenizer when training from scratch.")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Must match the records (paper: 10).")
define_training_flags(flags, train_batch_size=50, learning_rate=2e-5, max_seq_length=50)
flags.mark_flags_as_required(["input_file", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_pretraining(config_from_flags(PretrainConfig, FLAGS))


if __name__ == "__main__":
    run(main)
