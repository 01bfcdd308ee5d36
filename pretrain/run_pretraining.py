"""MLM continued pretraining of BERT on dialogue TFRecords (paper, section 5.3).

The one training stage (train/run_training.py) with `--objective=mlm`; flags follow Google
BERT's run_pretraining.py (`--input_file` names the records). Starts from `init_checkpoint`
(Google TF1, HuggingFace or this project's checkpoint) or from scratch (`bert_config_file` +
`vocab_file`). A killed run restarted with the same command resumes from its last checkpoint.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.train_flags import training_main

main = training_main(flags, objectives=["mlm"], default_objective="mlm")
flags.DEFINE_alias("input_file", "train_file")

if __name__ == "__main__":
    run(main)
