import os
import pathlib

# Keras 3 must run on TensorFlow, and TF's C++ start-up chatter hides test output.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow as tf

# Two logical CPU devices let MirroredStrategy run two replicas on this machine; this has to
# happen before TensorFlow initialises its devices, which is why it sits in conftest.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real data folder {SHARED_DATA} is missing (expected ../shared/data beside the repo)")
    return SHARED_DATA


TINY_WORDS = (
    "the order refund invoice address delivery when where is my i want a to please thanks "
    "hello change ship late money back track package discount code 退 货 我 想 要"
).split()


def write_tiny_vocab(path) -> str:
    """A small WordPiece vocabulary with BERT's special tokens at ids 0..4; returns the path."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS + ["##s", "##ed", "?", ",", "."]
    pathlib.Path(path).write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


def tiny_bert_config_for(vocab_file):
    """A 2-layer, 32-wide BERT config sized for `vocab_file`."""
    from dialoguecse_tf.encoder.bert_config import BertConfig

    with open(vocab_file, encoding="utf-8") as reader:
        vocab_size = sum(1 for _ in reader)
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
    )


@pytest.fixture
def tiny_vocab_file(tmp_path):
    return write_tiny_vocab(tmp_path / "vocab.txt")


@pytest.fixture
def tiny_bert_config(tiny_vocab_file):
    return tiny_bert_config_for(tiny_vocab_file)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: tests of seconds each: entry points doing real work (training, exporting, embedding, "
        "evaluating) and checks that train two runs or more (deselect with -m 'not slow' for the fast tier; "
        "CI runs all)"
    )


# The files of a minute or more of tests, longest first. run_scripts/test.sh hands whole files to
# two pytest-xdist workers in collection order (`--dist loadfile --no-loadscope-reorder`): started
# first, they leave no worker alone with one of them at the end of the run.
LONGEST_FILES = ("test_demo_script.py", "test_objectives.py", "test_crash_safety.py", "test_determinism.py",
                 "test_savedmodel.py", "test_multi_worker.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
