"""Writes DSE positive-pair TFRecords: consecutive utterances, or each utterance with itself.

  python data_prep/create_pair_data.py --input_file=../shared/data/sgd/train --input_format=sgd \
    --vocab_file=VOCAB --output_dir=runs/pairs

On Apache Beam, with the flags this script does not define going to Beam's PipelineOptions:

  python data_prep/create_pair_data.py --input_file=corpus/*.jsonl --vocab_file=VOCAB \
    --output_dir=runs/pairs --num_shards=16 --engine=beam --runner=DirectRunner \
    --direct_num_workers=2 --direct_running_mode=multi_processing
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.records_flags import records_main

main = records_main(flags, "pairs")

if __name__ == "__main__":
    run(main, pass_unknown=True)
