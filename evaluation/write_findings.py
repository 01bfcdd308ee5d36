"""Writes a merged table's findings by the project's one rule (`dialoguecse_tf/evaluation/findings.py`).

  python evaluation/write_findings.py --table=results/benchmark/results.json \
    --claims=experiments/claims/benchmark.yaml \
    --previous=d878363:results/benchmark/results.json --output_dir=results/benchmark

Writes <output_name>.md and <output_name>.json: each paper's claimed ordering checked column by
column (between rows of one seed or none, which measure no spread, the gap only), each column's
best and the rows level with it, and with --previous every cell that moved by more than the rule
calls level.
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.evaluation.findings import (findings_dict, findings_markdown, output_paths, read_claims,
                                                read_table)
from dialoguecse_tf.io_utils import atomic_open, write_json

flags.DEFINE_string("table", None, "The merged table (the JSON evaluation/merge_results.py writes).")
flags.DEFINE_string("claims", None, "A YAML file of the papers' claimed orderings: `claims:`, a list of "
                    "{paper, ordering, row, over, columns} (experiments/claims/).")
flags.DEFINE_string("previous", None, "An earlier version of the table to report what moved: a path, or "
                    "REV:PATH for the file as git commit REV holds it.")
flags.DEFINE_string("output_dir", None, "Where <output_name>.md and <output_name>.json are written.")
flags.DEFINE_string("output_name", "findings", "File name stem of the findings.")
flags.mark_flags_as_required(["table", "claims", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    table = read_table(FLAGS.table)
    claims = read_claims(FLAGS.claims)
    previous = read_table(FLAGS.previous) if FLAGS.previous else None
    markdown_path, json_path = output_paths(FLAGS.output_dir, FLAGS.output_name)
    text = findings_markdown(table, claims, previous, f"`{FLAGS.previous}`" if FLAGS.previous else "")
    with atomic_open(markdown_path, "w", encoding="utf-8") as writer:
        writer.write(text)
    write_json(json_path, {"table": FLAGS.table, "claims_file": FLAGS.claims, "previous": FLAGS.previous,
                           **findings_dict(table, claims, previous)})
    print(text)
    print(f"wrote {markdown_path} and {json_path}")


if __name__ == "__main__":
    run(main)
