"""precision: the dtype policy of each precision, and where bfloat16 and float16 are refused, from
what the machine's /proc/cpuinfo and GPUs say (the detection is monkeypatched to stand for other
machines)."""

import keras
import pytest

from dialoguecse_tf import precision
from dialoguecse_tf.config_fields import PRECISIONS

X86_WITH = "processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_bf16 amx_tile\n\nprocessor\t: 1\nflags\t\t: fpu\n"
X86_WITHOUT = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n"
ARM_WITH = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.fixture
def cpu(monkeypatch):
    """Makes the machine a CPU without GPU whose /proc/cpuinfo lists the flags given to the
    returned function (None: /proc/cpuinfo unreadable)."""
    monkeypatch.setattr(precision, "_first_gpu", lambda: None)

    def with_flags(flags):
        monkeypatch.setattr(precision, "cpu_bfloat16_flags", lambda: flags)

    return with_flags


def test_each_precision_has_its_keras_policy_and_reads_back_from_a_layer():
    assert [precision.dtype_policy(name) for name in PRECISIONS] == ["float32", "mixed_bfloat16", "mixed_float16"]
    for name in PRECISIONS:
        layer = keras.layers.Dense(2, dtype=precision.dtype_policy(name))
        assert precision.precision_of(layer) == name
    with pytest.raises(ValueError, match=r"precision must be one of \('float32', 'bfloat16', 'float16'\), got 'bf16'"):
        precision.dtype_policy("bf16")
    with pytest.raises(ValueError, match="none of the precisions"):
        precision.precision_of(keras.layers.Dense(2, dtype="bfloat16", name="pure"))


@pytest.mark.parametrize("text, flags", [(X86_WITH, ("avx512_bf16", "amx_bf16")), (X86_WITHOUT, ()),
                                         (ARM_WITH, ("bf16",)), ("", ())])
def test_bfloat16_arithmetic_is_read_from_cpuinfo(tmp_path, text, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(text, encoding="utf-8")
    assert precision.cpu_bfloat16_flags(str(path)) == flags


def test_an_unreadable_cpuinfo_tells_nothing(tmp_path):
    assert precision.cpu_bfloat16_flags(str(tmp_path / "missing")) is None


def test_bfloat16_is_refused_in_one_line_on_a_cpu_without_bfloat16_arithmetic(cpu):
    cpu(())
    with pytest.raises(ValueError) as refused:
        precision.check_precision("bfloat16")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("precision bfloat16 needs a CPU with bfloat16 arithmetic (x86: avx512_bf16 or amx_bf16")
    assert "/proc/cpuinfo lists none of them" in message and message.endswith("use --precision=float32")
    cpu(None)
    with pytest.raises(ValueError, match="/proc/cpuinfo cannot be read, so whether it has them cannot be told"):
        precision.check_precision("bfloat16")
    # float32 runs anywhere.
    precision.check_precision("float32")


@pytest.mark.parametrize("flags", [("avx512_bf16",), ("amx_bf16",), ("bf16",)])
def test_bfloat16_runs_on_a_cpu_with_bfloat16_arithmetic(cpu, flags):
    cpu(flags)
    precision.check_precision("bfloat16")


def test_float16_is_refused_without_a_gpu(cpu):
    cpu(("avx512_bf16", "amx_bf16"))
    with pytest.raises(ValueError, match="precision float16 needs a GPU: on CPU float16 is slower than float32"):
        precision.check_precision("float16")


class _FakeGpu:
    name = "/physical_device:GPU:0"


@pytest.mark.parametrize("capability, refused", [((7, 5), True), ((8, 0), False), ((9, 0), False)])
def test_bfloat16_on_a_gpu_follows_its_compute_capability(monkeypatch, capability, refused):
    monkeypatch.setattr(precision, "_first_gpu", lambda: _FakeGpu())
    monkeypatch.setattr(precision, "_gpu_capability", lambda gpu: capability)
    # The GPU decides, not the CPU beside it.
    monkeypatch.setattr(precision, "cpu_bfloat16_flags", lambda: ())
    if refused:
        with pytest.raises(ValueError, match=r"needs a GPU of compute capability 8.0 or more .* has 7\.5"):
            precision.check_precision("bfloat16")
    else:
        precision.check_precision("bfloat16")
    precision.check_precision("float16")


def test_a_tpu_is_not_judged_by_its_host_cpu(cpu):
    cpu(())
    precision.check_precision("bfloat16", device="TPU")
    with pytest.raises(ValueError):
        precision.check_precision("bfloat16", device="CPU")


def test_this_machine_is_judged_by_what_it_lists():
    """On the real machine: bfloat16 is allowed exactly when its /proc/cpuinfo lists bfloat16
    arithmetic (the machines here list avx512_bf16 and amx_bf16) or a GPU is there."""
    if precision._first_gpu() is not None:
        pytest.skip("this machine has a GPU")
    if precision.cpu_bfloat16_flags():
        precision.check_precision("bfloat16")
    else:
        with pytest.raises(ValueError, match="needs a CPU with bfloat16 arithmetic"):
            precision.check_precision("bfloat16")
