import json

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET,
                                                ContrastiveRecordSpec)
from dialoguecse_tf.records.mlm import (INPUT_IDS, INPUT_MASK, MASKED_LM_IDS, MASKED_LM_POSITIONS, MASKED_LM_WEIGHTS,
                                        MlmRecordSpec, RECORD_TYPE_MLM, SEGMENT_IDS)
from dialoguecse_tf.records.pairs import PairRecordSpec
from dialoguecse_tf.records.reader import canonicalize_record_file, read_dataset, read_records_info, resolve_records
from dialoguecse_tf.records.shards import ShardedRecordWriter
from dialoguecse_tf.records.spec import RECORDS_INFO_FILE, check_compatible, write_records_info

MLM_SPEC = MlmRecordSpec(max_seq_length=12, max_predictions_per_seq=3)
CONTRASTIVE_SPEC = ContrastiveRecordSpec(max_seq_length=8, num_context_turns=3, num_negatives=2)


def random_mlm_example(rng, spec=MLM_SPEC):
    length, preds = spec.max_seq_length, spec.max_predictions_per_seq
    return {
        INPUT_IDS: rng.integers(0, 30000, size=length),
        INPUT_MASK: rng.integers(0, 2, size=length),
        SEGMENT_IDS: rng.integers(0, 2, size=length),
        MASKED_LM_POSITIONS: rng.integers(0, length, size=preds),
        MASKED_LM_IDS: rng.integers(0, 30000, size=preds),
        MASKED_LM_WEIGHTS: rng.integers(0, 2, size=preds).astype(np.float32),
    }


def random_contrastive_example(rng, spec=CONTRASTIVE_SPEC):
    context = (spec.num_context_turns, spec.max_seq_length)
    candidates = (spec.num_candidates, spec.max_seq_length)
    return {
        CONTEXT_INPUT_IDS: rng.integers(0, 30000, size=context),
        CONTEXT_INPUT_MASK: rng.integers(0, 2, size=context),
        CONTEXT_TURN_MASK: rng.integers(0, 2, size=spec.num_context_turns),
        CONTEXT_TURN_OFFSET: rng.integers(-5, 6, size=spec.num_context_turns),
        CANDIDATE_INPUT_IDS: rng.integers(0, 30000, size=candidates),
        CANDIDATE_INPUT_MASK: rng.integers(0, 2, size=candidates),
    }


EXPECTED_SHAPES = {
    "mlm": {
        INPUT_IDS: [12],
        INPUT_MASK: [12],
        SEGMENT_IDS: [12],
        MASKED_LM_POSITIONS: [3],
        MASKED_LM_IDS: [3],
        MASKED_LM_WEIGHTS: [3],
    },
    "contrastive": {
        CONTEXT_INPUT_IDS: [3, 8],
        CONTEXT_INPUT_MASK: [3, 8],
        CONTEXT_TURN_MASK: [3],
        CONTEXT_TURN_OFFSET: [3],
        CANDIDATE_INPUT_IDS: [3, 8],
        CANDIDATE_INPUT_MASK: [3, 8],
    },
}


@pytest.mark.parametrize(
    "spec, make_example",
    [(MLM_SPEC, random_mlm_example), (CONTRASTIVE_SPEC, random_contrastive_example)],
    ids=["mlm", "contrastive"],
)
def test_round_trip_through_shards(tmp_path, spec, make_example):
    rng = np.random.default_rng(0)
    examples = [make_example(rng) for _ in range(11)]
    with ShardedRecordWriter(str(tmp_path / "train"), num_shards=3) as writer:
        for example in examples:
            writer.write(spec.serialize(example))
    assert writer.num_written == 11
    assert writer.shard_counts == [4, 4, 3]
    assert [p.rsplit("/", 1)[-1] for p in writer.paths] == [
        f"train-{i:05d}-of-00003.tfrecord" for i in range(3)
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"train-{i:05d}-of-00003.tfrecord" for i in range(3)]

    dataset = read_dataset(str(tmp_path / "train-*"), spec)
    expected_shapes = EXPECTED_SHAPES[spec.record_type]
    for name, tensor_spec in dataset.element_spec.items():
        assert tensor_spec.shape.as_list() == expected_shapes[name]
    assert set(dataset.element_spec) == set(expected_shapes)

    parsed = list(dataset.as_numpy_iterator())
    assert len(parsed) == len(examples)
    # Round-robin writing + one-record-per-file interleave restores write order.
    for got, want in zip(parsed, examples):
        for name, value in want.items():
            expected_dtype = np.float32 if name == MASKED_LM_WEIGHTS else np.int32
            assert got[name].dtype == expected_dtype, name
            np.testing.assert_array_equal(got[name], value.astype(expected_dtype), err_msg=name)

    shuffled = list(read_dataset([str(tmp_path / "train-*")], spec, shuffle_files=True, seed=1))
    assert len(shuffled) == len(examples)


def test_parse_works_in_dataset_map_on_scalar_strings():
    rng = np.random.default_rng(1)
    serialized = [CONTRASTIVE_SPEC.serialize(random_contrastive_example(rng)) for _ in range(4)]
    batch = next(iter(tf.data.Dataset.from_tensor_slices(serialized).map(CONTRASTIVE_SPEC.parse).batch(4)))
    assert batch[CONTEXT_INPUT_IDS].shape == (4, 3, 8)
    assert batch[CANDIDATE_INPUT_IDS].shape == (4, CONTRASTIVE_SPEC.num_candidates, 8)


def test_mlm_record_readable_with_google_bert_feature_spec():
    rng = np.random.default_rng(2)
    example = random_mlm_example(rng)
    # Verbatim from Google BERT's run_pretraining.py input_fn_builder.
    name_to_features = {
        "input_ids": tf.io.FixedLenFeature([12], tf.int64),
        "input_mask": tf.io.FixedLenFeature([12], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([12], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([3], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([3], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([3], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    parsed = tf.io.parse_single_example(MLM_SPEC.serialize(example), name_to_features)
    for name, value in example.items():
        np.testing.assert_array_equal(parsed[name].numpy(), value, err_msg=name)
    np.testing.assert_array_equal(parsed["next_sentence_labels"].numpy(), [0])


def test_serialize_rejects_wrong_shape():
    example = random_contrastive_example(np.random.default_rng(3))
    example[CONTEXT_INPUT_MASK] = example[CONTEXT_INPUT_MASK].reshape(-1)
    with pytest.raises(ValueError, match=r"'context_input_mask'.*expected shape \[3, 8\], got \[24\]"):
        CONTRASTIVE_SPEC.serialize(example)


def test_serialize_rejects_missing_feature():
    example = random_mlm_example(np.random.default_rng(4))
    del example[MASKED_LM_WEIGHTS]
    with pytest.raises(ValueError, match="masked_lm_weights"):
        MLM_SPEC.serialize(example)


def test_serialize_rejects_unexpected_feature_and_float_ids():
    example = random_mlm_example(np.random.default_rng(5))
    with pytest.raises(ValueError, match="input_idz"):
        MLM_SPEC.serialize({**example, "input_idz": example[INPUT_IDS]})
    with pytest.raises(ValueError, match="'input_ids'.*integer"):
        MLM_SPEC.serialize({**example, INPUT_IDS: example[INPUT_IDS] + 0.5})


def test_records_info_round_trip_and_mismatch(tmp_path):
    path = write_records_info(str(tmp_path), CONTRASTIVE_SPEC, {"num_records": np.int64(11)})
    assert path == str(tmp_path / RECORDS_INFO_FILE)
    assert json.loads((tmp_path / RECORDS_INFO_FILE).read_text())["record_type"] == "contrastive"
    assert [p.name for p in tmp_path.iterdir()] == [RECORDS_INFO_FILE]

    spec, stats = read_records_info(str(tmp_path), record_type="contrastive")
    assert spec == CONTRASTIVE_SPEC
    assert stats == {"num_records": 11}
    assert read_records_info(path)[0] == CONTRASTIVE_SPEC

    check_compatible(spec, max_seq_length=8, num_negatives=None)
    with pytest.raises(ValueError, match=r"num_negatives.*num_negatives=2.*num_negatives=5"):
        check_compatible(spec, num_negatives=5)
    with pytest.raises(ValueError, match="'contrastive'.*'mlm'"):
        read_records_info(str(tmp_path), record_type="mlm")


def test_spec_dict_round_trip_and_validation():
    assert MlmRecordSpec.from_dict(MLM_SPEC.to_dict()) == MLM_SPEC
    assert CONTRASTIVE_SPEC.to_dict() == {"max_seq_length": 8, "num_context_turns": 3, "num_negatives": 2,
                                          "context_layout": "nearest"}
    # records_info.json files written before context_layout existed still read, as "nearest".
    legacy = ContrastiveRecordSpec.from_dict({"max_seq_length": 8, "num_context_turns": 3, "num_negatives": 2})
    assert legacy == CONTRASTIVE_SPEC and legacy.num_context_slots == 3
    sides = ContrastiveRecordSpec(8, 3, 2, "sides")
    assert sides.num_context_slots == 6 and ContrastiveRecordSpec.from_dict(sides.to_dict()) == sides
    with pytest.raises(ValueError, match="num_negatives"):
        ContrastiveRecordSpec.from_dict({"max_seq_length": 8, "num_context_turns": 3})
    with pytest.raises(ValueError, match="max_seq_length"):
        MlmRecordSpec(max_seq_length=12.0, max_predictions_per_seq=3)


def test_missing_records_info_and_no_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="records_info.json"):
        read_records_info(str(tmp_path))
    pattern = str(tmp_path / "nothing-*.tfrecord")
    with pytest.raises(FileNotFoundError, match="nothing-"):
        read_dataset(pattern, MLM_SPEC)


def test_writer_leaves_nothing_when_body_raises(tmp_path):
    rng = np.random.default_rng(6)
    with pytest.raises(RuntimeError, match="boom"):
        with ShardedRecordWriter(str(tmp_path / "train"), num_shards=2) as writer:
            writer.write(MLM_SPEC.serialize(random_mlm_example(rng)))
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def _write_mlm_shards(folder, num_shards, count, keep_tmp=False):
    rng = np.random.default_rng(num_shards)
    with ShardedRecordWriter(str(folder / "mlm"), num_shards=num_shards) as writer:
        for _ in range(count):
            writer.write(MLM_SPEC.serialize(random_mlm_example(rng)))
    write_records_info(str(folder), MLM_SPEC, {"samples_written": count})
    return writer


def test_writer_removes_the_shards_of_an_earlier_run(tmp_path):
    # Review finding 11: a re-run with another --num_shards left the old shards beside the new.
    _write_mlm_shards(tmp_path, 3, 6)
    (tmp_path / "notes.txt").write_text("kept")
    writer = _write_mlm_shards(tmp_path, 1, 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlm-00000-of-00001.tfrecord", "notes.txt",
                                                          "records_info.json"]
    assert [p.rsplit("/", 1)[-1] for p in writer.stale_removed] == [f"mlm-{i:05d}-of-00003.tfrecord" for i in range(3)]
    files, _, _ = resolve_records([str(tmp_path / "*.tfrecord")], RECORD_TYPE_MLM)
    assert len(files) == 1


def test_record_count_mismatch_names_extra_or_missing_shards(tmp_path):
    _write_mlm_shards(tmp_path, 2, 6)
    extra = tmp_path / "mlm-00000-of-00002.tfrecord"
    (tmp_path / "mlm-00000-of-00009.tfrecord").write_bytes(extra.read_bytes())
    with pytest.raises(ValueError, match="hold 9 records but records_info.json says 6 were written; more "
                                         "records than written: extra or stale shards"):
        resolve_records([str(tmp_path / "*.tfrecord")], RECORD_TYPE_MLM)
    (tmp_path / "mlm-00000-of-00009.tfrecord").unlink()
    extra.unlink()
    with pytest.raises(ValueError, match="hold 3 records but records_info.json says 6 were written; fewer "
                                         "records than written: a shard is truncated or missing"):
        resolve_records([str(tmp_path / "*.tfrecord")], RECORD_TYPE_MLM)


_SERIALIZE_IN_A_PROCESS = """
import hashlib, sys
import numpy as np
from dialoguecse_tf.records.contrastive import ContrastiveRecordSpec
spec = ContrastiveRecordSpec(max_seq_length=8, num_context_turns=2, num_negatives=2)
example = {f.name: np.ones(f.shape, np.int64) for f in spec._features()}
print(hashlib.sha256(spec.serialize(example)).hexdigest())
"""


@pytest.mark.slow
def test_equal_records_serialize_to_equal_bytes_in_every_process():
    """Example features are a protobuf map, whose wire order otherwise changes from process to
    process; run keys hash record files by their bytes."""
    import subprocess
    import sys

    from conftest import REPO_ROOT

    spec = PairRecordSpec(8)
    serialized = spec.serialize({f.name: np.ones(f.shape, np.int64) for f in spec._features()})
    parsed = tf.train.Example.FromString(serialized)
    in_key_order = b"".join(
        tf.train.Features(feature={name: parsed.features.feature[name]}).SerializeToString(deterministic=True)
        for name in sorted(parsed.features.feature))
    assert serialized == b"\x0a" + _varint(len(in_key_order)) + in_key_order

    digests = {subprocess.run([sys.executable, "-c", _SERIALIZE_IN_A_PROCESS], capture_output=True, text=True,
                              cwd=REPO_ROOT, check=True).stdout.split()[-1] for _ in range(4)}
    assert len(digests) == 1


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_canonicalize_rewrites_map_order_only(tmp_path):
    spec = PairRecordSpec(8)
    examples = [{f.name: np.full(f.shape, i, np.int64) for f in spec._features()} for i in range(3)]
    path = str(tmp_path / "pairs-00000-of-00001.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for example in examples:
            proto = tf.train.Example.FromString(spec.serialize(example))
            # The wire form a process may write without deterministic serialization: the map
            # entries in another order (here reversed), built byte by byte so it is that order.
            entries = b"".join(
                tf.train.Features(feature={name: proto.features.feature[name]}).SerializeToString(deterministic=True)
                for name in sorted(proto.features.feature, reverse=True))
            writer.write(b"\x0a" + _varint(len(entries)) + entries)
    assert canonicalize_record_file(path) is True
    assert list(tf.data.TFRecordDataset(path).as_numpy_iterator()) == [spec.serialize(e) for e in examples]
    assert canonicalize_record_file(path) is False
