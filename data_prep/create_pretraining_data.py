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

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_corpus_flags, define_engine_flag, run
from dialoguecse_tf.prep import MlmDataConfig, run_create_records
from dialoguecse_tf.records.streaming import DEFAULT_RANDOM_NEXT_POOL_SIZE

define_corpus_flags(flags)
flags.DEFINE_string("output_dir", None, "Folder for the mlm-*.tfrecord shards, records_info.json, config and stats.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (vocab.txt) of the model to pretrain.")
flags.DEFINE_bool("do_lower_case", True, "Must match the vocabulary.")
flags.DEFINE_integer("max_seq_length", 50, "Tokens per record (paper: 50 for ECD/MDC, 100 for JDDC).")
flags.DEFINE_integer("max_predictions_per_seq", 10, "Most masked positions per record (paper: 10).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens masked (paper: 0.15).")
flags.DEFINE_integer("dupe_factor", 1, "How many times the corpus is masked, with different masks.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter-than-maximum record (BERT's default).")
flags.DEFINE_integer("random_seed", 12345, "Seed of the packing, the masking, the random next segments and the "
                     "shards.")
flags.DEFINE_integer("num_shards", 1, "Number of output files; a record goes to the one its seeded hash names.")
flags.DEFINE_integer("random_next_pool_size", DEFAULT_RANDOM_NEXT_POOL_SIZE,
                     "Random next segments come from the documents of a seeded sample of this many dialogues (all "
                     "of them in a smaller corpus), which bounds the memory of a corpus of any size.")
define_engine_flag(flags)
flags.mark_flags_as_required(["output_dir", "vocab_file"])
FLAGS = flags.FLAGS


def main(argv):
    run_create_records(config_from_flags(MlmDataConfig, FLAGS), pipeline_args=argv[1:])


if __name__ == "__main__":
    run(main, pass_unknown=True)
