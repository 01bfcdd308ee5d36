"""The one way the evaluation modules get matplotlib (headless, and an install hint if missing),
and the chart of a results table."""


def pyplot():
    """matplotlib.pyplot on the Agg backend (matplotlib is the `plot` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install 'dialoguecse_tf[plot]'") from None
    return plt


def save_png(figure, path: str) -> None:
    """Writes `figure` to `path` atomically and closes it."""
    from dialoguecse_tf.io_utils import atomic_open

    figure.tight_layout()
    with atomic_open(path, "wb") as writer:
        figure.savefig(writer, format="png", dpi=110)
    pyplot().close(figure)


def plot_table(table, path: str) -> None:
    """One panel per shown column, the rows' values side by side as horizontal bars with the
    seed spread as error bars, the rows the table bolds in orange (matplotlib: the `plot` extra)."""
    plt = pyplot()
    columns = table.columns()
    if not columns:
        raise ValueError("the table has no column to plot")
    num_columns = min(4, len(columns))
    num_rows = -(-len(columns) // num_columns)
    height = 0.3 * len(table.rows) + 1.0
    figure, axes = plt.subplots(num_rows, num_columns, figsize=(3.4 * num_columns, height * num_rows),
                                squeeze=False, sharey=True)
    labels = [row.label() for row in table.rows]
    positions = list(range(len(table.rows)))[::-1]
    best = table.best_by_column()
    for axis, (name, key, header) in zip(axes.flat, columns):
        values = [row.metrics.get(name, {}).get(key, float("nan")) for row in table.rows]
        errors = [row.spread.get(name, {}).get(key, 0.0) for row in table.rows]
        colors = ["tab:orange" if row.model in best.get((name, key), ()) else "tab:blue" for row in table.rows]
        axis.barh(positions, values, xerr=errors, color=colors, capsize=2, height=0.7)
        axis.set_title(header, fontsize=8)
        axis.tick_params(labelsize=7)
        axis.grid(axis="x", alpha=0.3)
    for axis in axes[:, 0]:
        axis.set_yticks(positions, labels)
    for axis in list(axes.flat)[len(columns):]:
        axis.set_visible(False)
    save_png(figure, path)
