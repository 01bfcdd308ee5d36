"""The export folders' layout, free of TensorFlow: what `savedmodel` and `interop` write and
`embed` and `encoder.checkpoints` read, so that a bad request fails before TensorFlow loads.

A SavedModel export is a folder of numeric version folders (TF Serving serves the highest), each
holding `saved_model.pb` and the `export_config.json` of the settings it fixed. A HuggingFace or
keras-hub export holds `dialoguecse_export.json`: its pooling, source and any recorded drift.
"""

import os

from dialoguecse_tf.io_utils import read_json_object

EXPORT_CONFIG_FILE = "export_config.json"
EXPORT_INFO_FILE = "dialoguecse_export.json"


def next_version(export_dir: str) -> int:
    """TF Serving serves the highest numeric subfolder; a new export gets the next number.

    Args:
      export_dir: the export folder (need not exist).

    Returns:
      1 for a missing or empty folder, else the highest numeric subfolder plus one.
    """
    if not os.path.isdir(export_dir):
        return 1
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    return max(versions, default=0) + 1


def export_version_dir(path: str) -> str:
    """The SavedModel folder of an export: `path` itself, or its highest numeric version folder."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such export folder")
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    versions = [name for name in os.listdir(path) if name.isdigit()]
    if not versions:
        raise FileNotFoundError(f"{path}: no SavedModel and no numeric version folder")
    return os.path.join(path, max(versions, key=int))


def export_settings(version_dir: str) -> dict:
    """The settings an export was written with (its `export_config.json`); {} when it has none."""
    path = os.path.join(version_dir, EXPORT_CONFIG_FILE)
    return read_json_object(path, "an export config") if os.path.isfile(path) else {}
