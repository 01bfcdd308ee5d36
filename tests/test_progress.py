"""dialoguecse_tf/progress.py: progress on stderr, a bar on a terminal, plain lines elsewhere."""

import io
import logging

from dialoguecse_tf import progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_a_bar_with_the_values_as_given(monkeypatch, capsys, caplog):
    screen = _Terminal()
    monkeypatch.setattr(progress, "_terminal", screen)
    bar = progress.Progress(4, "step")
    with caplog.at_level(logging.INFO, logger="absl"):
        for step, loss in ((1, 8.0), (2, 2.0), (3, 1.0), (4, 0.5)):
            bar.update(step, {"loss": loss}, log=step % 2 == 0)
    out, err = capsys.readouterr()
    assert out == "" and err == "" and not caplog.records
    shown = screen.getvalue()
    assert "\r" in shown and "4/4" in shown
    # The last value, not Keras' running average (2.875).
    assert "loss: 0.5000" in shown and "2.875" not in shown


def test_without_a_terminal_a_plain_line_at_the_marked_units_and_the_last(monkeypatch, capsys, caplog):
    monkeypatch.setattr(progress, "_terminal", None)
    bar = progress.Progress(5, "step")
    with caplog.at_level(logging.INFO, logger="absl"):
        for step in range(1, 6):
            bar.update(step, {"loss": 1.0 / step, "learning_rate": 1e-4}, log=step == 2)
    out, err = capsys.readouterr()
    assert out == "" and "\x1b[" not in err and "\r" not in err
    assert [record.getMessage() for record in caplog.records] == [
        "step 2/5: loss 0.5, learning_rate 0.0001", "step 5/5: loss 0.2, learning_rate 0.0001"]


def test_draw_on_sends_bars_to_the_terminal_behind_a_pipe(monkeypatch):
    screen = _Terminal()
    monkeypatch.setattr(progress, "_terminal", None)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert progress.terminal() is None
    progress.draw_on(screen)
    assert progress.terminal() is screen
    progress.Progress(2, "batch").update(2)
    assert "2/2" in screen.getvalue()
