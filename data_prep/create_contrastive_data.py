"""Writes DialogueCSE contrastive TFRecords: context turns, turn mask, response and negatives.

  python data_prep/create_contrastive_data.py --input_file=corpus/*.jsonl --vocab_file=VOCAB \\
    --output_dir=runs/contrastive --num_shards=16 --engine=beam --runner=DirectRunner \\
    --direct_num_workers=2 --direct_running_mode=multi_processing
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_corpus_flags, define_engine_flag, run
from dialoguecse_tf.prep import ContrastiveDataConfig, run_create_records
from dialoguecse_tf.records.streaming import DEFAULT_NEGATIVE_POOL_SIZE

define_corpus_flags(flags)
flags.DEFINE_string("output_dir", None, "Folder for the contrastive-*.tfrecord shards, records_info.json, config and stats.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the encoder to train.")
flags.DEFINE_bool("do_lower_case", True, "Must match the vocabulary.")
flags.DEFINE_integer("max_seq_length", 50, "Tokens per utterance (paper: 50 for ECD/MDC, 100 for JDDC).")
flags.DEFINE_integer("num_context_turns", 3, "Context utterances per side with context_layout=sides (the authors' "
                     "code: 3 before and 3 after the response), or nearest on either side with nearest (paper: 3).")
flags.DEFINE_enum("context_layout", "sides", ["sides", "nearest"],
                  "sides: left and right contexts kept apart, as the released code reads them (serves every "
                  "setting); nearest: only the num_context_turns nearest turns (records of older versions).")
flags.DEFINE_integer("num_negatives", 9, "Negative responses per sample (paper: 9; the authors' files carry 49).")
flags.DEFINE_integer("max_responses_per_dialogue", 0, "Responses sampled per dialogue; 0 uses every turn once.")
flags.DEFINE_bool("use_given_candidates", True, "Use the candidate lists the input carries (authors' format); "
                  "false makes every turn a response with sampled negatives.")
flags.DEFINE_integer("random_seed", 12345, "Seed for negative and response sampling.")
flags.DEFINE_integer("num_shards", 1, "Number of output files; a record goes to the one its seeded hash names.")
flags.DEFINE_integer("negative_pool_size", DEFAULT_NEGATIVE_POOL_SIZE,
                     "Negatives are drawn from a uniform sample of this many of the corpus' utterances (all of "
                     "them in a smaller corpus), which bounds the memory of a corpus of any size.")
define_engine_flag(flags)
flags.mark_flags_as_required(["output_dir", "vocab_file"])
FLAGS = flags.FLAGS


def main(argv):
    run_create_records(config_from_flags(ContrastiveDataConfig, FLAGS), pipeline_args=argv[1:])


if __name__ == "__main__":
    run(main, pass_unknown=True)
