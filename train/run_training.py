"""Trains any registered objective on its records: the one training stage.

  python train/run_training.py --objective=dialoguecse --aggregation=mean \
    --train_file='runs/ecd/contrastive_records/contrastive-*' --init_checkpoint=runs/ecd/pretrain/encoder \
    --output_dir=runs/ecd/finetune/dialoguecse_i2 --num_train_steps=600

`--preset=paper_ecd_dialoguecse` (see dialoguecse_tf/presets.py) sets the paper's values; flags
given on the command line win. Writes config.json, checkpoints/, tensorboard/ and the trained
encoder (encoder/) into --output_dir; a killed run restarted with the same command resumes.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.train_flags import training_main

main = training_main(flags)

if __name__ == "__main__":
    run(main)
