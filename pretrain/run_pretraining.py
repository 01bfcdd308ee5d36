"""MLM continued pretraining of BERT on dialogue TFRecords (paper, section 5.3).

The one training stage (train/run_training.py) with `--objective=mlm`; flags follow Google
BERT's run_pretraining.py (`--input_file` names the records). Starts from `init_checkpoint`
(Google TF1, HuggingFace or this project's checkpoint) or from scratch (`bert_config_file` +
`vocab_file`). A killed run restarted with the same command resumes from its last checkpoint.
"""

from absl import flags

from dialoguecse_tf.cli import flag_utils, train_flags
from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.train_flags import define_training_flags, stage_from_flags
from dialoguecse_tf.stage import run_stage

define_training_flags(flags, objectives=["mlm"], default_objective="mlm")
flags.DEFINE_alias("input_file", "train_file")
# The generated flags belong to the modules that define them; --helpshort shows them here.
flags.adopt_module_key_flags(flag_utils)
flags.adopt_module_key_flags(train_flags)
flags.mark_flags_as_required(["train_file", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_stage(*stage_from_flags(FLAGS))


if __name__ == "__main__":
    run(main)
