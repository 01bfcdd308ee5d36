"""Hyper-parameter sweeps (the paper's Figure 2-3, Tables 3-4): one metric table and plot per sweep.

Each point of a sweep is one evaluation run (`results.json`) of a model trained with one value
of the swept parameter; the table lists every model row and dataset metric per value. A point's
training seeds ("<model> [seed <n>]" rows) are folded into mean ± sample std, as the results
tables fold them (`tables.aggregate_seeds`); the plot draws the spread as error bars.
"""

from __future__ import annotations

import os

from dialoguecse_tf.evaluation.plotting import pyplot, save_png
from dialoguecse_tf.evaluation.provenance import portable_path
from dialoguecse_tf.evaluation.results_io import read_results
from dialoguecse_tf.evaluation.tables import aggregate_seeds, metric_text, results_table, table_columns
from dialoguecse_tf.io_utils import atomic_open, write_json


def parse_points(points: list[str]) -> list[tuple[str, str]]:
    """"VALUE=PATH" strings (the `--point` flag) as (value, path) pairs."""
    pairs = []
    for point in points:
        value, separator, path = point.partition("=")
        if not separator or not value or not path:
            raise ValueError(f"a sweep point must be VALUE=PATH, got {point!r}")
        pairs.append((value, path))
    return pairs


def collect_sweep(parameter: str, points: list[tuple[str, str]]) -> dict:
    """`points`: (value, results.json path) pairs, in plotting order."""
    if not points:
        raise ValueError("a sweep needs at least one point")
    rows = []
    for value, path in points:
        try:
            table = aggregate_seeds(results_table([(path, read_results(path))]))
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        for table_row in table.rows:
            row = {"value": value, "model": table_row.model, "metrics": table_row.metrics,
                   "checkpoint": table_row.checkpoints[0] if len(table_row.checkpoints) == 1 else table_row.checkpoints,
                   "source": portable_path(path)}
            if table_row.seeds:
                row.update(spread=table_row.spread, seeds=table_row.seeds, per_seed=table_row.per_seed)
            rows.append(row)
    return {"parameter": parameter, "rows": rows}


def _columns(sweep: dict) -> list[tuple[str, str, str]]:
    datasets = sorted({name for row in sweep["rows"] for name in row["metrics"]})
    return [(dataset, key, f"{dataset} {label}")
            for dataset, key, label in table_columns(datasets, [row["metrics"] for row in sweep["rows"]])]


def sweep_markdown(sweep: dict) -> str:
    columns = _columns(sweep)
    lines = [
        "| " + " | ".join([sweep["parameter"], "Model"] + [label for _, _, label in columns]) + " |",
        "|" + "|".join([":--", ":--"] + ["--:"] * len(columns)) + "|",
    ]
    for row in sweep["rows"]:
        cells = [str(row["value"]), row["model"]]
        for dataset, key, _ in columns:
            value = row["metrics"].get(dataset, {}).get(key)
            cells.append("" if value is None else metric_text(value, row.get("spread", {}).get(dataset, {}).get(key)))
        lines.append("| " + " | ".join(cells) + " |")
    seeds = sorted({len(row["seeds"]) for row in sweep["rows"] if row.get("seeds")})
    note = (f" Rows over training seeds ({', '.join(map(str, seeds))}) show their mean ± the sample standard "
            "deviation; each seed's numbers are in the JSON." if seeds else "")
    return ("\n".join(lines) + "\n\nAll numbers are percentages (Corr.: D-STS Spearman; MAP/MRR: SR)." + note
            + "\n")


def plot_sweep(sweep: dict, path: str) -> None:
    """One panel per dataset metric, one line per model against the swept value, as the paper's
    Figures 2 and 3 put DialogueCSE and SiameseBERT_M side by side (matplotlib: the `plot` extra)."""
    plt = pyplot()
    values = list(dict.fromkeys(str(row["value"]) for row in sweep["rows"]))
    columns = _columns(sweep)
    num_columns = min(3, len(columns))
    num_rows = -(-len(columns) // num_columns)
    figure, axes = plt.subplots(num_rows, num_columns, figsize=(3.6 * num_columns, 2.8 * num_rows), squeeze=False)
    for axis, (dataset, key, label) in zip(axes.flat, columns):
        for model in dict.fromkeys(row["model"] for row in sweep["rows"]):
            model_rows = {str(r["value"]): r for r in sweep["rows"] if r["model"] == model}
            ys = [model_rows[v]["metrics"].get(dataset, {}).get(key) if v in model_rows else None for v in values]
            spreads = [model_rows[v].get("spread", {}).get(dataset, {}).get(key) if v in model_rows else None
                       for v in values]
            axis.errorbar(values, [float("nan") if y is None else y for y in ys],
                          yerr=[0.0 if e is None else e for e in spreads], marker="o", capsize=3, label=model)
        axis.set_title(label, fontsize=9)
        axis.set_xlabel(sweep["parameter"], fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(columns):]:
        axis.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    save_png(figure, path)


def write_sweep(sweep: dict, output_dir: str, stem: str, plot: bool = True) -> list:
    paths = [os.path.join(output_dir, f"{stem}.json"), os.path.join(output_dir, f"{stem}.md")]
    if plot:
        # First, so that a missing matplotlib leaves no table without its plot.
        paths.append(os.path.join(output_dir, f"{stem}.png"))
        plot_sweep(sweep, paths[-1])
    write_json(paths[0], sweep)
    with atomic_open(paths[1], "w", encoding="utf-8") as writer:
        writer.write(sweep_markdown(sweep))
    return paths
