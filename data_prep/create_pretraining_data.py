"""Writes MLM continued-pretraining TFRecords (BERT's schema) from a dialogue corpus.

Dialogues are documents and utterances are sentences (candidate utterances that are no
dialogue's turn form documents too); packing and 80/10/10 masking are Google's
(tf-models-official's create_pretraining_data); random next segments come from a seeded sample
of dialogues (--random_next_pool_size).

  python data_prep/create_pretraining_data.py --input_file=../shared/data/ecd/train/train_data.txt.sample \
    --input_format=authors --vocab_file=VOCAB --output_dir=runs/mlm

On Apache Beam, with the flags this script does not define going to Beam's PipelineOptions:

  python data_prep/create_pretraining_data.py --input_file=corpus/*.jsonl --vocab_file=VOCAB \
    --output_dir=runs/mlm --num_shards=16 --engine=beam --runner=DirectRunner \
    --direct_num_workers=2 --direct_running_mode=multi_processing
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.records_flags import records_main

main = records_main(flags, "mlm")

if __name__ == "__main__":
    run(main, pass_unknown=True)
