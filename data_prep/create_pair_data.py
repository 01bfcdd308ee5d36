"""Writes DSE positive-pair TFRecords: consecutive utterances, or each utterance with itself.

  python data_prep/create_pair_data.py --input_file=../shared/data/sgd/train --input_format=sgd \
    --vocab_file=VOCAB --output_dir=runs/pairs

On Apache Beam, with the flags this script does not define going to Beam's PipelineOptions:

  python data_prep/create_pair_data.py --input_file=corpus/*.jsonl --vocab_file=VOCAB \
    --output_dir=runs/pairs --num_shards=16 --engine=beam --runner=DirectRunner \
    --direct_num_workers=2 --direct_running_mode=multi_processing
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_corpus_flags, define_engine_flag, run
from dialoguecse_tf.prep import PairDataConfig, run_create_records

define_corpus_flags(flags)
flags.DEFINE_string("output_dir", None, "Folder for the pairs-*.tfrecord shards, records_info.json, config and stats.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the encoder to train.")
flags.DEFINE_bool("do_lower_case", True, "Must match the vocabulary.")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per utterance (DSE's released code: 32).")
flags.DEFINE_enum("pairing", "consecutive", ["consecutive", "self"],
                  "consecutive: adjacent turns (DSE); self: each distinct utterance with itself (DSE-dropout, "
                  "unsupervised SimCSE).")
flags.DEFINE_integer("min_words", 3, "Keep only utterances with more words than this (DSE: 3; a CJK character "
                     "counts as a word).")
flags.DEFINE_integer("random_seed", 24, "Seed of the shuffle of all pairs: shards and their order (DSE's release: 24).")
flags.DEFINE_integer("num_shards", 1, "Number of output files; a pair goes to the one its seeded hash names, and "
                     "sorting a shard holds it in memory.")
define_engine_flag(flags)
flags.mark_flags_as_required(["output_dir", "vocab_file"])
FLAGS = flags.FLAGS


def main(argv):
    run_create_records(config_from_flags(PairDataConfig, FLAGS), pipeline_args=argv[1:])


if __name__ == "__main__":
    run(main, pass_unknown=True)
