"""The DialogueCSE contrastive stage (paper, section 4), and the SiameseBERT baselines.

Trains BERT (bottom `num_frozen_layers` frozen) with matching-guided embedding, turn
aggregation (`mean` = I2, `attention` = I1) and NT-Xent over the contrastive records;
`--model_type=siamese_s|siamese_m` trains the paper's siamese baselines on the same records.
The fine-tuned encoder is written to `output_dir/encoder`.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_training_flags, run
from dialoguecse_tf.finetuning import MODEL_TYPES, FinetuneConfig, run_finetuning

flags.DEFINE_multi_string("train_file", None, "Contrastive TFRecord file or glob (data_prep/create_contrastive_data.py).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json, only to train from a random initialisation.")
flags.DEFINE_string("vocab_file", None, "vocab.txt; with init_checkpoint, overrides the checkpoint's own.")
flags.DEFINE_bool("do_lower_case", True, "Lower-casing of the tokenizer when not given by init_checkpoint.")
flags.DEFINE_string("eval_select_file", None, "SR set (select.txt) to evaluate on every eval_steps and at the end.")
flags.DEFINE_string("eval_sts_file", None, "D-STS set (sts.txt) to evaluate on every eval_steps and at the end.")
flags.DEFINE_integer("eval_steps", 0, "Evaluate every this many steps; 0 evaluates only at the end.")
flags.DEFINE_enum("model_type", "dialoguecse", list(MODEL_TYPES), "DialogueCSE or a SiameseBERT baseline.")
flags.DEFINE_enum("aggregation", "mean", ["mean", "attention"], "Turn aggregation: mean (I2, eq. 7) or attention (I1, eq. 5-6).")
flags.DEFINE_integer("attention_hidden_size", 256, "Hidden units of the I1 scoring FFN (not given in the paper).")
flags.DEFINE_integer("matching_hidden_size", 256, "Hidden units of the SiameseBERT matching MLP.")
flags.DEFINE_float("temperature", 0.1, "NT-Xent temperature tau (paper: 0.1).")
flags.DEFINE_integer("num_negatives", 9, "Negatives per response (paper: 9); at most what the records carry.")
flags.DEFINE_integer("num_context_turns", 3, "Context turns (paper: 3); at most what the records carry.")
flags.DEFINE_integer("max_train_examples", 0, "Train on only the first this many records (data-scale study); 0: all.")
flags.DEFINE_integer("num_frozen_layers", 6, "Bottom BERT layers kept frozen, with the embeddings (paper: 6).")
flags.DEFINE_integer("num_length_buckets", 4, "DialogueCSE encodes a step's sequences in this many length groups, "
                     "each cut to its longest sequence (same result, less padding); 1 encodes all at max_seq_length.")
define_training_flags(flags, train_batch_size=20, learning_rate=5e-5, max_seq_length=50)
flags.mark_flags_as_required(["train_file", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_finetuning(config_from_flags(FinetuneConfig, FLAGS))


if __name__ == "__main__":
    run(main)
