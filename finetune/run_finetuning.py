"""The DialogueCSE contrastive stage (paper, section 4), and the SiameseBERT baselines.

The one training stage (train/run_training.py) with a contrastive objective, chosen by
`--model_type` (an alias of `--objective`): `dialoguecse` trains BERT (bottom
`num_frozen_layers` frozen) with matching-guided embedding, turn aggregation (`mean` = I2,
`attention` = I1) and NT-Xent; `siamese_s|siamese_m` train the paper's siamese baselines on
the same records. The fine-tuned encoder is written to `output_dir/encoder`.
"""

from absl import flags

from dialoguecse_tf.cli import flag_utils, train_flags
from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.train_flags import define_training_flags, stage_from_flags
from dialoguecse_tf.objectives.base import get_objective_class, objective_names
from dialoguecse_tf.objectives.contrastive import ContrastiveObjective
from dialoguecse_tf.stage import run_stage

CONTRASTIVE = [name for name in objective_names() if issubclass(get_objective_class(name), ContrastiveObjective)]
define_training_flags(flags, objectives=CONTRASTIVE, default_objective="dialoguecse")
flags.DEFINE_alias("model_type", "objective")
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
