"""The hand-written data-prep entry points' flag defaults equal their config dataclasses'
defaults, so a default is decided in one place. The training, evaluation, record and demo-corpus
entry points generate their flags from their configs (`cli/flag_utils.define_config_flags`), so
theirs are equal by construction; that the generated flags parse into the configs' defaults is
checked by tests/records/test_records_registry.py."""

import json

import pytest

from conftest import REPO_ROOT
from forked_entry_points import run_python

# entry point -> (module, config class) whose fields its flags fill
ENTRY_POINTS = {
    "build_vocab.py": ("dialoguecse_tf.prep", "VocabConfig"),
    "build_sr_set.py": ("dialoguecse_tf.prep", "SrSetConfig"),
}

PROBE = """
import dataclasses, importlib, json, runpy, sys
from absl import flags
script, module, name = sys.argv[1:]
runpy.run_path(script, run_name="entry_point")
config_class = getattr(importlib.import_module(module), name)
pairs = {}
def visit(cls):
    for field in dataclasses.fields(cls):
        if dataclasses.is_dataclass(field.type) or isinstance(field.default_factory, type):
            continue
        if field.name in flags.FLAGS and field.default is not dataclasses.MISSING:
            default = flags.FLAGS[field.name].default
            pairs[field.name] = [None if default is None else (list(default) if isinstance(default, list) else default),
                                 list(field.default) if isinstance(field.default, tuple) else field.default]
visit(config_class)
print(json.dumps(pairs))
"""


@pytest.mark.parametrize("script", sorted(ENTRY_POINTS))
def test_flag_defaults_equal_config_defaults(script):
    module, name = ENTRY_POINTS[script]
    completed = run_python(["-c", PROBE, REPO_ROOT / "data_prep" / script, module, name], text=True, cwd=REPO_ROOT,
                           timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    pairs = json.loads(completed.stdout.strip().splitlines()[-1])
    assert len(pairs) >= 3, pairs
    differing = {field: values for field, values in pairs.items()
                 if values[0] != values[1] and not (values[0] in (None, []) and values[1] in (None, []))}
    assert not differing, f"{script}: flag default != config default: {differing}"
