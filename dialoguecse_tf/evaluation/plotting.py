"""The one way the evaluation modules get matplotlib: headless, and an install hint if missing."""


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
