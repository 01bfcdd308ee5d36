"""Writes DialogueCSE contrastive TFRecords: context turns, turn mask, response and negatives.

  python data_prep/create_contrastive_data.py --input_file=corpus/*.jsonl --vocab_file=VOCAB \\
    --output_dir=runs/contrastive --num_shards=16 --engine=beam --runner=DirectRunner \\
    --direct_num_workers=2 --direct_running_mode=multi_processing
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.records_flags import records_main

main = records_main(flags, "contrastive")

if __name__ == "__main__":
    run(main, pass_unknown=True)
