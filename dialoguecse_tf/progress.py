"""Progress, always on stderr: stdout is a tool's answer (the embedding CLI's neighbours, the
runner's plan), and absl logging writes to stderr as well.

On a terminal, progress is a bar redrawn in place (Keras' `Progbar`). Into a file or a pipe a
redrawn bar is noise (ANSI codes and carriage returns), so there progress is a plain line
through absl logging at the units the caller marks and at the last one. An entry point's
stderr is a pipe into the filter of TensorFlow's noise (`cli.noise`), which passes whole lines
only; the filter hands the terminal behind it to `draw_on`, and bars are drawn there.
"""

import contextlib
import sys

import keras
from absl import logging

_terminal = None  # the terminal `draw_on` was given


def draw_on(stream) -> None:
    """Draws every later bar on `stream`, a terminal that stderr leads to through a pipe."""
    global _terminal
    _terminal = stream


def terminal():
    """The terminal bars are drawn on: `draw_on`'s, else stderr when it is one; else None."""
    if _terminal is not None:
        return _terminal
    return sys.stderr if hasattr(sys.stderr, "isatty") and sys.stderr.isatty() else None


class Progress:
    """Progress through `total` units named `unit_name`: a bar on a terminal, else plain lines.

    Values are shown as given, not averaged over the units as Keras' bar would by default.
    """

    def __init__(self, total: int, unit_name: str):
        self.total = total
        self.unit_name = unit_name
        self._stream = terminal()
        self._bar = None
        if self._stream is not None:
            # Keras decides at construction whether it redraws, from the stdout it sees then.
            with contextlib.redirect_stdout(self._stream):
                self._bar = keras.utils.Progbar(total, unit_name=unit_name, stateless_metrics=())

    def update(self, current: int, values: dict | None = None, log: bool = False) -> None:
        """Shows progress at unit `current` of `total`.

        Args:
          current: the units done.
          values: {name: number} shown beside the count (e.g. the loss).
          log: without a terminal, log a plain line for this unit; the last unit always has one.
        """
        values = values or {}
        if self._bar is not None:
            with contextlib.redirect_stdout(self._stream):
                self._bar.update(current, list(values.items()))
        elif log or current >= self.total:
            shown = ", ".join(f"{name} {value:.4g}" for name, value in values.items())
            logging.info("%s %d/%d%s", self.unit_name, current, self.total, f": {shown}" if shown else "")
