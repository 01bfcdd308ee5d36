"""Merges several results.json files into one Table 2-style Markdown + JSON table.

  python evaluation/merge_results.py --results=runs/eval/ecd/results.json \
    --results=runs/eval/jddc/results.json --output_dir=runs/eval

Rows with the same model name are merged (e.g. one model evaluated on ECD and on JDDC by two
runs); conflicting numbers or one dataset name used for different files are errors.
"""

import os

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.evaluation.plotting import plot_table
from dialoguecse_tf.evaluation.tables import aggregate_seeds, merge_results, order_rows, select_columns, write_table

flags.DEFINE_multi_string("results", None, "A results.json to merge; repeat for each, in row order.")
flags.DEFINE_string("output_dir", None, "Where <output_name>.md and <output_name>.json are written.")
flags.DEFINE_string("output_name", "merged_results", "File name stem of the merged table.")
flags.DEFINE_list("columns", [], "Columns to show, in order, as Dataset:metric_key (e.g. ECD:map,Banking77:acc_1shot); "
                  "default: every column.")
flags.DEFINE_bool("skip_missing_columns", False, "Leave out a --columns entry the merged files do not have "
                  "instead of failing (a benchmark whose parts have not all run yet).")
flags.DEFINE_list("row_order", [], "Model names (seeds folded) to put first, in this order; the other rows follow "
                  "in order of first appearance.")
flags.DEFINE_bool("mark_best", False, "Bold each ranked column's best row (by the mean over seeds) and every row "
                  "level with it (means within twice the larger seed std; a row of one seed beside one of one seed "
                  "or none has no spread to be level by).")
flags.DEFINE_bool("chart", False, "Also write <output_name>.png: one bar panel per column, seed spread as error bars.")
flags.mark_flags_as_required(["results", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    table = order_rows(aggregate_seeds(merge_results(FLAGS.results)), FLAGS.row_order)
    table = select_columns(table, FLAGS.columns, FLAGS.mark_best, FLAGS.skip_missing_columns)
    markdown_path, json_path = write_table(table, FLAGS.output_dir, FLAGS.output_name)
    if FLAGS.chart:
        plot_table(table, os.path.join(FLAGS.output_dir, FLAGS.output_name + ".png"))
    print(table.to_markdown())
    print(f"wrote {markdown_path} and {json_path}")


if __name__ == "__main__":
    run(main)
