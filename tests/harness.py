"""Checks every serializable class of the package passes: the idea of keras-hub's
`TestCase.run_serialization_test`, plus equal outputs and a .keras file for layers and models."""

import json
import pathlib
import tempfile

import keras
import numpy as np


def _config_json(instance) -> str:
    # JSON, as a .keras file stores it: a tuple and a list compare equal there, and a value
    # JSON cannot hold fails here rather than at the first save.
    return json.dumps(instance.get_config(), sort_keys=True, indent=1)


def _outputs(instance, call_args):
    return keras.tree.map_structure(np.asarray, instance(*call_args))


def _assert_same_outputs(expected, got, what: str):
    keras.tree.assert_same_structure(expected, got)
    for want, have in zip(keras.tree.flatten(expected), keras.tree.flatten(got)):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6, err_msg=what)


def _copy_weights(source, target, call_args) -> None:
    # A layer that builds on its first call has no weights before it.
    if call_args is not None and not target.built:
        target(*call_args)
    target.set_weights(source.get_weights())


def run_serialization_test(instance, call_args=None):
    """Round-trips `instance` through its config, Keras' serialization and, for a model, a
    .keras file; each revived copy must describe itself alike and compute alike.

    Args:
      instance: an object of a class registered with
        `keras.saving.register_keras_serializable`: a layer, a model or a learning-rate
        schedule, called or not.
      call_args: tuple, the positional arguments of one small call of `instance` (a
        schedule's step, a layer's tensors, a model's input dict); None checks configs only.

    Returns:
      The copy `from_config(get_config())` made, with `instance`'s weights when it has any,
      for checks beyond the round trip.
    """
    cls = type(instance)
    config = _config_json(instance)
    attributes = set(dir(instance))

    revived = cls.from_config(instance.get_config())
    assert _config_json(revived) == config, f"{cls.__name__}: from_config(get_config()) changed the config"
    assert set(dir(revived)) == attributes, f"{cls.__name__}: from_config gave other attributes"

    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(instance)))
    deserialized = keras.saving.deserialize_keras_object(serialized)
    assert type(deserialized) is cls, f"deserialize_keras_object gave a {type(deserialized).__name__}, not {cls.__name__}"
    assert _config_json(deserialized) == config, f"{cls.__name__}: serialize/deserialize changed the config"

    if call_args is None:
        return revived
    expected = _outputs(instance, call_args)
    copies = {"from_config": revived, "deserialize_keras_object": deserialized}
    if isinstance(instance, keras.layers.Layer):
        for copy in copies.values():
            _copy_weights(instance, copy, call_args)
    for how, copy in copies.items():
        _assert_same_outputs(expected, _outputs(copy, call_args), f"{cls.__name__} after {how}")

    if isinstance(instance, keras.Model):
        with tempfile.TemporaryDirectory() as folder:
            path = str(pathlib.Path(folder) / "model.keras")
            instance.save(path)
            loaded = keras.saving.load_model(path)
        assert type(loaded) is cls and _config_json(loaded) == config, f"{cls.__name__}: .keras changed the config"
        _assert_same_outputs(expected, _outputs(loaded, call_args), f"{cls.__name__} after a .keras save/load")
    return revived
