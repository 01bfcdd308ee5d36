"""Field checks more than one format makes: a non-empty utterance, candidate labels, services."""

from __future__ import annotations

from dialoguecse_tf.data.readers.lines import LineError


def check_utterance(text: str, what: str) -> str:
    """`text`, unless it is empty or whitespace-only.

    Args:
      text: an utterance as written.
      what: where it is in its record ("candidate 2", ...), for the message.

    Returns:
      `text` unchanged; raises `LineError` ("empty_utterance") for an empty one.
    """
    if not text.strip():
        raise LineError("empty_utterance", f"empty {what}")
    return text


def check_candidate_labels(labels: tuple[int, ...], n_candidates: int) -> tuple[int, ...]:
    """The authors' candidate labels, checked: one 0/1 label per candidate, exactly the first 1.

    Args:
      labels: the labels as integers.
      n_candidates: how many candidates the record has.

    Returns:
      `labels` unchanged; raises `LineError` ("label_count", "bad_label") otherwise.
    """
    if len(labels) != n_candidates:
        raise LineError("label_count", f"{len(labels)} candidate labels for {n_candidates} candidates")
    if any(label not in (0, 1) for label in labels):
        raise LineError("bad_label", "candidate labels must be 0 or 1")
    if labels[0] != 1 or sum(labels) != 1:
        raise LineError("bad_label", "exactly the first candidate label must be 1")
    return labels


def check_services(value: object) -> tuple[str, ...]:
    """A dialogue's services (task domains), checked: a non-empty list of non-empty strings.

    Args:
      value: the decoded JSON value.

    Returns:
      The services as a tuple; raises `LineError` ("bad_services") otherwise.
    """
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise LineError("bad_services", "services must be a non-empty list of non-empty strings")
    return tuple(value)
