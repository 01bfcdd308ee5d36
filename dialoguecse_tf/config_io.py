"""Stage configs as JSON files beside the stage's outputs."""

import dataclasses
import os

from dialoguecse_tf.io_utils import write_json

CONFIG_FILE = "config.json"


def config_to_dict(config) -> dict:
    return dataclasses.asdict(config)


def write_config(config, output_dir: str, filename: str = CONFIG_FILE) -> str:
    """Writes `config` (a dataclass, possibly nested) as JSON, atomically."""
    path = os.path.join(output_dir, filename)
    write_json(path, config_to_dict(config), sort_keys=True)
    return path
