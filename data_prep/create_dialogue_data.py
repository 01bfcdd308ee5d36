"""Writes dial2vec's training TFRecords: each dialogue with negatives that keep one
interlocutor's turns and replace the other's with that role's utterances from the corpus.

  python data_prep/create_dialogue_data.py --input_file=../shared/data/sgd/train --input_format=sgd \
    --vocab_file=VOCAB --output_dir=runs/dialogues --max_seq_length=512

On Apache Beam, with the flags this script does not define going to Beam's PipelineOptions:

  python data_prep/create_dialogue_data.py --input_file=corpus/*.jsonl --vocab_file=VOCAB \
    --output_dir=runs/dialogues --num_shards=16 --engine=beam --runner=DirectRunner \
    --direct_num_workers=2 --direct_running_mode=multi_processing
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.records_flags import records_main

main = records_main(flags, "dialogues")

if __name__ == "__main__":
    run(main, pass_unknown=True)
