"""Compute precisions: the dtype policy a model runs in, and whether this machine runs it well.

`float32` is the default. `bfloat16` is mixed precision: the backbone (and MLM's head, which shares
its embedding table) computes in bfloat16 while every variable stays float32: Keras's
"mixed_bfloat16" policy, given to the layers that take it (`encoder.backbone.build_backbone`),
never set as the global policy, so nothing built beside them changes. Checkpoints are therefore
written in float32 and load anywhere, in any precision. Everything a loss or a served vector
reads is float32: every model casts BERT's outputs to float32 before pooling, the training heads
whose outputs are compared (DialogueCSE's matching and aggregation, DSE's projection head,
SiameseBERT's matching layer) run in float32, and `losses` computes similarities, temperatures,
softmax and losses in float32 (a cosine / 0.05 logit in bfloat16 keeps about 3 significant
digits: bfloat16 has an 8-bit significand). `float16` (the former `--mixed_precision`) is the
same with float16 compute, and dynamic loss scaling in training; GPU only.

Where bfloat16 is allowed (`check_precision`), detected, not assumed:

* CPU: only with bfloat16 arithmetic in its instruction set, read from /proc/cpuinfo: on x86
  `avx512_bf16` (AVX512_BF16's bfloat16 dot products) or `amx_bf16` (AMX tiles' bfloat16 matrix
  products), the instructions oneDNN, TensorFlow's CPU matrix library, runs bfloat16 products
  on; on Arm the `bf16` feature (Armv8.6's BF16 extension; untested here). Without them bfloat16
  is emulated (converted to float32 and back around float32 arithmetic), slower than float32,
  so it is refused. A machine without /proc/cpuinfo is refused too: its support cannot be told.
* GPU (the first one TensorFlow sees, where the stage and encode() place the model): NVIDIA
  GPUs have bfloat16 matrix units from compute capability 8.0 (Ampere), below which bfloat16 is
  refused; from 8.0 it runs with a warning: no GPU that runs TensorFlow was available here, so
  it is untested.
* TPU (`--distribution_strategy=tpu`): bfloat16 is the TPU's native matrix format; untested here.
"""

from __future__ import annotations

import functools

from absl import logging

from dialoguecse_tf.config_fields import PRECISIONS

DEFAULT_PRECISION = "float32"
# Keras's dtype policy of each precision.
_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
CPUINFO = "/proc/cpuinfo"
# The x86 flags of bfloat16 arithmetic (AVX512_BF16: Cooper Lake, Sapphire Rapids, Zen 4 and later;
# AMX-BF16: Sapphire Rapids and later) and Arm's (the BF16 extension).
X86_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
ARM_BFLOAT16_FEATURES = ("bf16",)
# NVIDIA's first compute capability with bfloat16 matrix units (Ampere).
GPU_BFLOAT16_CAPABILITY = (8, 0)


def dtype_policy(precision: str) -> str:
    """Keras's dtype policy name of `precision` ("float32", "mixed_bfloat16", "mixed_float16").

    Raises:
      ValueError: for a precision not in `PRECISIONS`.
    """
    if precision not in _POLICIES:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return _POLICIES[precision]


def precision_of(layer) -> str:
    """The precision a Keras layer (a backbone) computes in, from its dtype policy.

    Raises:
      ValueError: for a policy that is none of `dtype_policy`'s (e.g. pure "bfloat16" variables).
    """
    name = layer.dtype_policy.name
    for precision, policy in _POLICIES.items():
        if policy == name:
            return precision
    raise ValueError(f"{layer.name} has dtype policy {name!r}, none of the precisions {PRECISIONS}")


@functools.lru_cache(maxsize=None)
def cpu_bfloat16_flags(path: str = CPUINFO) -> tuple[str, ...] | None:
    """The bfloat16 arithmetic flags this CPU's /proc/cpuinfo lists (x86 `flags`, Arm `Features`).

    Returns:
      The flags of `X86_BFLOAT16_FLAGS` and `ARM_BFLOAT16_FEATURES` found, in that order; () for
      none; None when `path` cannot be read (no /proc/cpuinfo: not Linux).
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as reader:
            lines = reader.read().splitlines()
    except OSError:
        return None
    listed = set()
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            listed.update(value.split())
    return tuple(flag for flag in X86_BFLOAT16_FLAGS + ARM_BFLOAT16_FEATURES if flag in listed)


def _first_gpu():
    import tensorflow as tf

    # Physical devices: listing them does not start the runtime, which a multi-worker strategy
    # and a split CPU need to configure first.
    gpus = tf.config.list_physical_devices("GPU")
    return gpus[0] if gpus else None


def _gpu_capability(gpu) -> tuple | None:
    import tensorflow as tf

    capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
    return tuple(capability) if capability else None


def check_precision(precision: str, device: str | None = None) -> None:
    """Raises ValueError in one line where `precision` is unsupported or slower than float32
    (the module docstring); logs a warning where it is allowed but untested (GPU, TPU).

    Args:
      precision: one of `PRECISIONS`; float32 always passes.
      device: "CPU", "GPU" or "TPU", where the model runs; None: the first GPU TensorFlow sees,
        else the CPU.

    Raises:
      ValueError: naming the precision, what was detected and what to pass instead.
    """
    dtype_policy(precision)
    if precision == "float32":
        return
    gpu = _first_gpu() if device in (None, "GPU") else None
    device = device or ("GPU" if gpu is not None else "CPU")
    if device == "TPU":
        logging.warning("precision %s on a TPU: untested here (no TPU was available)", precision)
        return
    if precision == "float16":
        if device != "GPU" or gpu is None:
            raise ValueError("precision float16 needs a GPU: on CPU float16 is slower than float32; use "
                             "--precision=bfloat16 on a CPU with bfloat16 arithmetic, or float32")
        logging.warning("precision float16 on a GPU: untested here (no GPU that runs TensorFlow was available)")
        return
    if device == "GPU":
        capability = _gpu_capability(gpu) if gpu is not None else None
        if capability is not None and capability < GPU_BFLOAT16_CAPABILITY:
            raise ValueError(f"precision bfloat16 needs a GPU of compute capability 8.0 or more (bfloat16 matrix "
                             f"units, Ampere and later); {gpu.name} has {'.'.join(map(str, capability))}: use "
                             f"--precision=float32 (or float16)")
        logging.warning("precision bfloat16 on a GPU: untested here (no GPU that runs TensorFlow was available)")
        return
    flags = cpu_bfloat16_flags()
    if not flags:
        found = (f"{CPUINFO} lists none of them" if flags is not None
                 else f"{CPUINFO} cannot be read, so whether it has them cannot be told")
        raise ValueError(f"precision bfloat16 needs a CPU with bfloat16 arithmetic (x86: "
                         f"{' or '.join(X86_BFLOAT16_FLAGS)}; Arm: {ARM_BFLOAT16_FEATURES[0]}) and {found}: "
                         f"emulated bfloat16 is slower than float32; use --precision=float32")
    logging.info("precision bfloat16 on the CPU: %s detected in %s", ", ".join(flags), CPUINFO)
