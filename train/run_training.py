"""Trains any registered objective on its records: the one training stage.

  python train/run_training.py --objective=dialoguecse --aggregation=mean \
    --train_file='runs/ecd/contrastive_records/contrastive-*' --init_checkpoint=runs/ecd/pretrain/encoder \
    --output_dir=runs/ecd/finetune/dialoguecse_i2 --num_train_steps=600

`--preset=paper_dialoguecse_i2` (see dialoguecse_tf/presets.py) sets the paper's values; flags
given on the command line win. Writes config.json, checkpoints/, tensorboard/ and the trained
encoder (encoder/) into --output_dir; a killed run restarted with the same command resumes.
"""

from absl import flags

from dialoguecse_tf.cli import flag_utils, train_flags
from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.train_flags import define_training_flags, stage_from_flags
from dialoguecse_tf.stage import run_stage

define_training_flags(flags)
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
