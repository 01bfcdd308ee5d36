import os
import pathlib

# Keras 3 must run on TensorFlow, and TF's C++ start-up chatter hides test output.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real data folder {SHARED_DATA} is missing (expected ../shared/data beside the repo)")
    return SHARED_DATA
