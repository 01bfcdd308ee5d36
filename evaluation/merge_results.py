"""Merges several results.json files into one Table 2-style Markdown + JSON table.

  python evaluation/merge_results.py --results=runs/eval/ecd/results.json \
    --results=runs/eval/jddc/results.json --output_dir=runs/eval

Rows with the same model name are merged (e.g. one model evaluated on ECD and on JDDC by two
runs); conflicting numbers or one dataset name used for different files are errors.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.evaluation.results import aggregate_seeds, merge_results, write_table

flags.DEFINE_multi_string("results", None, "A results.json to merge; repeat for each, in row order.")
flags.DEFINE_string("output_dir", None, "Where <output_name>.md and <output_name>.json are written.")
flags.DEFINE_string("output_name", "merged_results", "File name stem of the merged table.")
flags.mark_flags_as_required(["results", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    table = aggregate_seeds(merge_results(FLAGS.results))
    markdown_path, json_path = write_table(table, FLAGS.output_dir, FLAGS.output_name)
    print(table.to_markdown())
    print(f"wrote {markdown_path} and {json_path}")


if __name__ == "__main__":
    run(main)
