"""Record types as registered objects (`records.registry`): each type's data-prep flags are its
settings dataclass, its entry point run with defaults writes those settings, and a new record type
is its module and one registry line: the flags, the runner's tools and the records reader then
know it."""

import dataclasses
import functools
import json
import re
import subprocess
import sys
from typing import ClassVar

import numpy as np
import pytest
from absl import flags as absl_flags

from conftest import REPO_ROOT, write_tiny_vocab
from dialoguecse_tf.cli.records_flags import define_records_flags, records_config_from_flags
from dialoguecse_tf.config_fields import field, field_kind
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.experiments.tools import TOOLS
from dialoguecse_tf.prep import RecordsConfig, run_create_records
from dialoguecse_tf.records import dialogues
from dialoguecse_tf.records.reader import read_records_info, resolve_records
from dialoguecse_tf.records.record_type import RecordType
from dialoguecse_tf.records.registry import RECORD_TYPES, get_record_type
from dialoguecse_tf.records.source import CorpusConfig
from dialoguecse_tf.records.spec import INT64, FixedFeature, RecordSpec, write_records_info
from forked_entry_points import run_python

# The flags every record entry point has besides its type's settings.
SHARED_FLAGS = {"input_file", "input_format", "skip_malformed", "merge_speakers", "min_turns", "output_dir",
                "vocab_file", "do_lower_case", "engine"}
_ABSL_FLAGS = re.compile(r"^(help|helpfull|helpshort|helpxml|only_check_args|pdb|pdb_post_mortem|run_with_pdb|"
                         r"run_with_profiling|profile_file|use_cprofile_for_profiling|logtostderr|alsologtostderr|"
                         r"log_dir|v|verbosity|logger_levels|stderrthreshold|showprefixforinfo|flagfile|undefok|"
                         r"log_.*)$")


class _Flags:
    """absl's flags module with every DEFINE and mark bound to one private FlagValues."""

    def __init__(self):
        self.FLAGS = absl_flags.FlagValues()

    def __getattr__(self, name):
        value = getattr(absl_flags, name)
        if name.startswith(("DEFINE", "mark_")):
            return functools.partial(value, flag_values=self.FLAGS)
        return value


def _defined(record_type) -> absl_flags.FlagValues:
    flags = _Flags()
    define_records_flags(flags, record_type)
    return flags.FLAGS


def _flag_type(settings_class, settings_field) -> str:
    if settings_field.metadata.get("choices"):
        return "string enum"
    kind, _ = field_kind(settings_class, settings_field.name)
    return {bool: "bool", int: "int", float: "float", str: "string"}[kind]


def _entry_point_flags(script) -> dict:
    """{flag: (default, choices)} of an entry point's own flags, from its --helpxml."""
    done = subprocess.run([sys.executable, script, "--helpxml"], capture_output=True, text=True, cwd=REPO_ROOT)
    flags = {}
    for block in re.findall(r"<flag>(.*?)</flag>", done.stdout, re.S):
        name = re.search(r"<name>([^<]+)</name>", block).group(1)
        if not _ABSL_FLAGS.match(name):
            default = re.search(r"<default>([^<]*)</default>", block)
            choices = re.findall(r"<enum_value>([^<]+)</enum_value>", block)
            flags[name] = (default.group(1) if default else None, choices)
    return flags


@pytest.mark.parametrize("name", sorted(RECORD_TYPES))
def test_generated_flags_are_the_settings_fields(name):
    """Each settings field is a flag of its name, default, type and choices, in the generator
    and in the entry point the runner calls; the entry point has no other flag but the shared ones."""
    record_type = RECORD_TYPES[name]
    flag_values = _defined(record_type)
    settings_fields = dataclasses.fields(record_type.settings_class)
    assert set(flag_values) == SHARED_FLAGS | {f.name for f in settings_fields}
    script_flags = _entry_point_flags(record_type.entry_point)
    assert set(script_flags) == set(flag_values)
    for settings_field in settings_fields:
        flag = flag_values[settings_field.name]
        assert flag.default == settings_field.default and flag.help.endswith(settings_field.metadata["help"])
        assert flag.flag_type() == _flag_type(record_type.settings_class, settings_field)
        choices = list(settings_field.metadata["choices"] or ())
        assert (list(flag.parser.enum_values) if choices else []) == choices
        default = settings_field.default
        default_text = str(default).lower() if isinstance(default, bool) else str(default)
        assert script_flags[settings_field.name] == (default_text, choices)
    for required in ("input_file", "output_dir", "vocab_file"):
        with pytest.raises(absl_flags.IllegalFlagValueError, match=required):
            _defined(record_type)(["prog", *(f"--{other}=x" for other in {"input_file", "output_dir", "vocab_file"}
                                             - {required})])


def _corpus(path) -> str:
    """12 dialogues of 6 turns between two speakers: enough for every record type's defaults."""
    words = ("order", "refund", "address", "package", "money", "track", "change", "ship")
    lines = [json.dumps({"turns": [{"speaker": "ua"[j % 2], "text": f"where is my {words[(i + j) % 8]} {i} {j}"}
                                   for j in range(6)]}) for i in range(12)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RECORD_TYPES))
def test_an_entry_point_run_with_defaults_writes_the_default_settings(name, tmp_path):
    """The entry point given only the required flags writes records whose config.json holds the
    settings class's defaults, as `RecordsConfig` with them would."""
    record_type = RECORD_TYPES[name]
    corpus, vocab = _corpus(tmp_path / "corpus.jsonl"), write_tiny_vocab(tmp_path / "vocab.txt")
    output_dir = tmp_path / "out"
    done = run_python([REPO_ROOT / record_type.entry_point, f"--input_file={corpus}", f"--vocab_file={vocab}",
                       f"--output_dir={output_dir}"], text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = RecordsConfig(CorpusConfig((corpus,)), str(output_dir), vocab, settings=record_type.settings_class())
    assert json.loads((output_dir / "config.json").read_text()) == json.loads(json.dumps(expected.to_dict()))
    spec, stats = read_records_info(str(output_dir), name)
    assert spec == record_type.split_settings(record_type.settings_class())[0] and stats["samples_written"] > 0
    assert len(list(output_dir.glob(record_type.file_pattern))) == 1


def test_parsed_defaults_are_the_settings_defaults():
    for name, record_type in RECORD_TYPES.items():
        flag_values = _defined(record_type)
        flag_values(["prog", "--input_file=c.jsonl", "--output_dir=out", "--vocab_file=vocab.txt"])
        config = records_config_from_flags(record_type, flag_values)
        assert config == RecordsConfig(CorpusConfig(("c.jsonl",)), "out", "vocab.txt",
                                       settings=record_type.settings_class()), name


def test_record_types_load_without_tensorflow():
    """The entry points define their flags and check their paths before TensorFlow's seconds of loading."""
    done = subprocess.run([sys.executable, "-c", "import sys; import dialoguecse_tf.cli.records_flags, "
                           "dialoguecse_tf.experiments.tools; print('tensorflow' in sys.modules)"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_the_dialogue_constants_are_the_packings():
    from dialoguecse_tf.encoder import packing

    assert (dialogues.NUM_ROLES, dialogues.TRUNCATIONS) == (packing.NUM_ROLES, packing.TRUNCATIONS)


def test_every_registered_type_is_a_runner_tool():
    for record_type in RECORD_TYPES.values():
        tool = TOOLS[record_type.tool]
        assert (tool.script, tool.version, tool.effective_settings({})) == (record_type.entry_point,
                                                                             record_type.tool_version, None)


# A toy record type, as a new one would be written in records/toy.py: a spec, settings, a writer
# and its RecordType.
@dataclasses.dataclass(frozen=True)
class ToyRecordSpec(RecordSpec):
    """One feature: a dialogue's turn count times `scale`, repeated max_seq_length times."""

    record_type: ClassVar[str] = "toy"

    max_seq_length: int

    def _features(self):
        return (FixedFeature("toy_turns", INT64, (self.max_seq_length,)),)


@dataclasses.dataclass(frozen=True)
class ToySettings:
    max_seq_length: int = field(4, "Values per record.")
    scale: int = field(2, "What a turn counts for.")
    num_shards: int = field(1, "Number of output files.")


def write_toy_records(dialogues, tokenizer, output_dir, spec, scale=2, num_shards=1, stats=None):
    from dialoguecse_tf.records.shards import ShardedRecordWriter

    del tokenizer
    stats = stats if stats is not None else PrepStats()
    with ShardedRecordWriter(TOY.shard_prefix(output_dir), num_shards) as writer:
        for dialogue in dialogues:
            writer.write(spec.serialize({"toy_turns": np.full(spec.max_seq_length, scale * len(dialogue.turns))}))
    stats.increment("samples_written", writer.num_written)
    write_records_info(output_dir, spec, TOY.records_info(stats, {"scale": scale}))
    return stats


TOY = RecordType(name="toy", spec_class=ToyRecordSpec, settings_class=ToySettings, write=write_toy_records,
                 entry_point="data_prep/create_toy_data.py", tool="toy_records",
                 info_arguments=(("toy_scale", "scale"),))


def test_a_new_record_type_is_its_module_and_one_registry_line(tmp_path, monkeypatch):
    assert "toy" not in RECORD_TYPES and "toy_records" not in TOOLS
    monkeypatch.setitem(RECORD_TYPES, "toy", TOY)

    flag_values = _defined(get_record_type("toy"))
    assert flag_values["scale"].default == 2 and flag_values["num_shards"].default == 1
    corpus, vocab = _corpus(tmp_path / "corpus.jsonl"), write_tiny_vocab(tmp_path / "vocab.txt")
    flag_values(["prog", f"--input_file={corpus}", f"--output_dir={tmp_path / 'toy'}", f"--vocab_file={vocab}",
                 "--scale=3", "--num_shards=2"])
    config = records_config_from_flags(TOY, flag_values)
    assert config.settings == ToySettings(scale=3, num_shards=2)

    tool = TOOLS["toy_records"]
    assert (tool.script, tool.effective_settings({"scale": 3})) == ("data_prep/create_toy_data.py", None)

    stats = run_create_records(config)
    assert stats["samples_written"] == 12
    spec, info = read_records_info(str(tmp_path / "toy"), "toy")
    assert spec == ToyRecordSpec(4) and (info["toy_scale"], info["samples_written"]) == (3, 12)
    files, _, _ = resolve_records([str(tmp_path / "toy" / TOY.file_pattern)], "toy")
    assert len(files) == 2
    assert json.loads((tmp_path / "toy" / "config.json").read_text())["scale"] == 3
    with pytest.raises(ValueError, match=r"engine=beam does not build 'toy' records yet; it builds \['contrastive'"):
        run_create_records(dataclasses.replace(config, engine="beam"), ("--runner=DirectRunner",))
