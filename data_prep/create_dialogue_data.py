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

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_corpus_flags, define_engine_flag, run
from dialoguecse_tf.prep import DialogueDataConfig, run_create_records
from dialoguecse_tf.records.streaming import DEFAULT_NEGATIVE_POOL_SIZE

define_corpus_flags(flags)
flags.DEFINE_string("output_dir", None, "Folder for the dialogues-*.tfrecord shards, records_info.json, config and "
                    "stats.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the encoder to train.")
flags.DEFINE_bool("do_lower_case", True, "Must match the vocabulary.")
flags.DEFINE_integer("max_seq_length", 512, "Tokens per dialogue (dial2vec: 512); see --truncation.")
flags.DEFINE_enum("truncation", "head", ["head", "recent_turns"],
                  "Too long a dialogue keeps its first max_seq_length tokens (head: the release's BERT path) or its "
                  "most recent whole turns (recent_turns); train with the same --truncation.")
flags.DEFINE_integer("num_negatives", 9, "Negatives per dialogue (dial2vec: 9).")
flags.DEFINE_enum("keep_role", "random", ["random", "released"],
                  "Which interlocutor a negative keeps: random per negative (the paper) or always the second "
                  "speaker (the released code's role 1).")
flags.DEFINE_integer("min_dialogue_turns", 5, "Drop dialogues with fewer turns (dial2vec: 5).")
flags.DEFINE_integer("max_dialogues", 0, "Write a seeded sample of this many dialogues (0: all); negatives still "
                     "draw from the whole corpus.")
flags.DEFINE_integer("samples_per_dialogue", 10, "Samples written per dialogue, each with freshly drawn negatives "
                     "(the release's samples_per_line: 10), so one pass over the records is one release epoch.")
flags.DEFINE_integer("random_seed", 12345, "Seed of the sample and of the negatives.")
flags.DEFINE_integer("num_shards", 1, "Number of output files; a record goes to the one its seeded hash names.")
flags.DEFINE_integer("negative_pool_size", DEFAULT_NEGATIVE_POOL_SIZE,
                     "Each role's replacement utterances are drawn from a uniform sample of this many of the "
                     "corpus' utterances of that role (all of them in a smaller corpus), which bounds the memory.")
define_engine_flag(flags)
flags.mark_flags_as_required(["output_dir", "vocab_file"])
FLAGS = flags.FLAGS


def main(argv):
    run_create_records(config_from_flags(DialogueDataConfig, FLAGS), pipeline_args=argv[1:])


if __name__ == "__main__":
    run(main, pass_unknown=True)
