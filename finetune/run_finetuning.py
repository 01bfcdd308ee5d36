"""The DialogueCSE contrastive stage (paper, section 4), and the SiameseBERT baselines.

The one training stage (train/run_training.py) with a contrastive objective, chosen by
`--model_type` (an alias of `--objective`): `dialoguecse` (`--variant=released`, the authors'
code, or `paper_text`; `--aggregation=mean` for I2, `attention` for I1) or the paper's
siamese baselines `siamese_s|siamese_m`, all on the same records. The fine-tuned encoder is
written to `output_dir/encoder`.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.train_flags import training_main
from dialoguecse_tf.objectives.contrastive import ContrastiveObjective
from dialoguecse_tf.objectives.registry import get_objective_class, objective_names

CONTRASTIVE = [name for name in objective_names() if issubclass(get_objective_class(name), ContrastiveObjective)]
main = training_main(flags, objectives=CONTRASTIVE, default_objective="dialoguecse")
flags.DEFINE_alias("model_type", "objective")

if __name__ == "__main__":
    run(main)
