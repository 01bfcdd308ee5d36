"""Training curves from `train_log.jsonl` files: a start/end summary table and a PNG.

What moved during training (loss, the share of samples whose positive ranks first, the mean
cosine of positive and of negative pairs and their gap) is the first thing to look at when a contrastive objective does or does not beat another;
these files are committed beside the results they explain.
"""

from __future__ import annotations

import os

import numpy as np

from dialoguecse_tf.evaluation.plotting import pyplot, save_png
from dialoguecse_tf.io_utils import atomic_open, write_json
from dialoguecse_tf.training.train_log import read_train_log

CURVE_METRICS = ("loss", "positive_ranked_first", "positive_cosine", "negative_cosine", "cosine_gap")


def load_curves(runs: list[tuple[str, str]]) -> dict:
    """(name, train_log.jsonl path) pairs -> {name: {"steps": [...], metric: [...]}} over the
    training entries (evaluation entries left out), metrics missing from a log left out."""
    if not runs:
        raise ValueError("give at least one NAME=PATH train log")
    curves = {}
    for name, path in runs:
        entries = [entry for entry in read_train_log(path) if "loss" in entry]
        if not entries:
            raise ValueError(f"{path}: no training entry")
        curve = {"steps": [entry["step"] for entry in entries]}
        for metric in CURVE_METRICS:
            if all(metric in entry for entry in entries):
                curve[metric] = [entry[metric] for entry in entries]
        curves[name] = curve
    return curves


def summarize(curves: dict, window: int = 5) -> list[dict]:
    """Per run and metric: the mean of the first and of the last `window` logged values (a
    single logged step is noisy: one batch)."""
    rows = []
    for name, curve in curves.items():
        for metric in CURVE_METRICS:
            if metric in curve:
                values = np.asarray(curve[metric], dtype=np.float64)
                rows.append({"run": name, "metric": metric, "first_step": curve["steps"][0],
                             "last_step": curve["steps"][-1], "start": float(values[:window].mean()),
                             "end": float(values[-window:].mean())})
    return rows


def summary_markdown(rows: list[dict], window: int = 5) -> str:
    lines = ["| Run | Metric | Start | End | Change |", "|:--|:--|--:|--:|--:|"]
    for row in rows:
        lines.append(f"| {row['run']} | {row['metric']} | {row['start']:.4f} | {row['end']:.4f} | "
                     f"{row['end'] - row['start']:+.4f} |")
    return "\n".join(lines) + (
        f"\n\nStart: mean of the first {window} logged steps; end: mean of the last {window} (each logged "
        "value is one batch's). positive_ranked_first: the share of samples whose true candidate scores "
        "highest of its candidates; positive_cosine / negative_cosine: mean cosine of the true and of the "
        "sampled candidates' pairs the loss compares; cosine_gap: their difference.\n")


LINE_STYLES = ("-", "--", ":", "-.")


def line_style(index: int) -> dict:
    """Run `index`'s colour and dash: matplotlib's ten colours, then the next dash, so a study of
    more than ten runs draws no two alike."""
    return {"color": f"C{index % 10}", "linestyle": LINE_STYLES[(index // 10) % len(LINE_STYLES)]}


def plot_curves(curves: dict, path: str) -> None:
    """One panel per metric, one line per run (matplotlib: the `plot` extra)."""
    plt = pyplot()
    metrics = [metric for metric in CURVE_METRICS if any(metric in curve for curve in curves.values())]
    figure, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.0), squeeze=False)
    for axis, metric in zip(axes.flat, metrics):
        for index, (name, curve) in enumerate(curves.items()):
            if metric in curve:
                axis.plot(curve["steps"], curve[metric], label=name, linewidth=1, **line_style(index))
        axis.set_title(metric, fontsize=9)
        axis.set_xlabel("step", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=6)
    save_png(figure, path)


def write_curves(curves: dict, output_dir: str, stem: str, plot: bool = True, window: int = 5) -> list:
    os.makedirs(output_dir, exist_ok=True)
    paths = [os.path.join(output_dir, f"{stem}.json"), os.path.join(output_dir, f"{stem}.md")]
    if plot:
        paths.append(os.path.join(output_dir, f"{stem}.png"))
        plot_curves(curves, paths[-1])
    rows = summarize(curves, window)
    write_json(paths[0], {"window": window, "summary": rows})
    with atomic_open(paths[1], "w", encoding="utf-8") as writer:
        writer.write(summary_markdown(rows, window))
    return paths
