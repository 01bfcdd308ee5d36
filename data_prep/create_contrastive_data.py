"""Writes DialogueCSE contrastive TFRecords: context turns, turn mask, response and negatives."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_corpus_flags, run
from dialoguecse_tf.data.pipeline import ContrastiveDataConfig, run_create_records

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
flags.DEFINE_integer("num_shards", 1, "Number of output files.")
flags.mark_flags_as_required(["output_dir", "vocab_file"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_create_records(config_from_flags(ContrastiveDataConfig, FLAGS))


if __name__ == "__main__":
    run(main)
