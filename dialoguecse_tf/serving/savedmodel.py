"""SavedModel export for TF Serving: raw UTF-8 strings in, sentence embeddings out.

The exported graph is `SentenceEncoder.embed_texts` itself (tokenization in-graph with
tensorflow-text, BERT, pooling), so served vectors are the vectors `encode()` returns.
A second signature takes token ids for clients that tokenize themselves; a third,
`embed_dialogues`, embeds whole dialogues through `DialogueEncoder.embed_dialogues`, the graph
`encode_dialogues()` runs: every dialogue's turns flattened into `turns` with their `speakers`,
and `dialogue_lengths` (turns per dialogue). A dialogue's first speaker is role 0 and the other
role 1; a dialogue with other than two speakers is refused, as `encode_dialogues()` refuses it.
Every signature checks its inputs with readable messages (`tf.errors.InvalidArgumentError`).
An export computes in the precision it was written with (`ExportConfig.precision`, recorded in
`export_config.json`); its signatures take strings and int32 ids and return float32 in every one.
"""

import dataclasses
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.encoder.backbone import set_compiled_elementwise
from dialoguecse_tf.encoder.dialogue import DialogueEncoder, dialogue_settings, dialogue_turns
from dialoguecse_tf.encoder.sentence import SentenceEncoder, encode_in_batches
from dialoguecse_tf.serving.layout import EXPORT_CONFIG_FILE, export_settings, export_version_dir, next_version

SERVING_SIGNATURE = "serving_default"
TOKENS_SIGNATURE = "embed_tokens"
DIALOGUES_SIGNATURE = "embed_dialogues"
TEXT_INPUT = "text"
OUTPUT_KEY = "embedding"


class _ExportModule(tf.Module):
    def __init__(self, encoder: SentenceEncoder, normalize: bool, dialogue_encoder: DialogueEncoder):
        super().__init__(name="dialoguecse_export")
        self.encoder = encoder
        self.dialogue_encoder = dialogue_encoder
        self.tokenizer = encoder.tokenizer
        self.backbone = encoder.backbone
        self._normalize = normalize

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="turns"),
        tf.TensorSpec([None], tf.string, name="speakers"),
        tf.TensorSpec([None], tf.int32, name="dialogue_lengths"),
    ])
    def serve_dialogues(self, turns, speakers, dialogue_lengths):
        dialogue_lengths = tf.cast(dialogue_lengths, tf.int64)
        checks = [
            tf.debugging.assert_positive(dialogue_lengths, message="every dialogue needs at least one turn"),
            tf.debugging.assert_equal(tf.reduce_sum(dialogue_lengths), tf.size(turns, out_type=tf.int64),
                                      message="dialogue_lengths must add up to the number of turns"),
            tf.debugging.assert_equal(tf.size(speakers), tf.size(turns), message="every turn needs one speaker"),
        ]
        # What follows reads speakers by dialogue and fails obscurely on inconsistent input, so it
        # waits for the checks; graph ops without side effects would otherwise run first.
        with tf.control_dependencies(checks):
            checks = [_assert_two_speakers(speakers, dialogue_lengths)]
        with tf.control_dependencies(checks):
            turns, speakers, dialogue_lengths = (tf.identity(turns), tf.identity(speakers),
                                                 tf.identity(dialogue_lengths))
        first = tf.repeat(tf.gather(speakers, tf.cumsum(dialogue_lengths, exclusive=True)), dialogue_lengths)
        roles = tf.RaggedTensor.from_row_lengths(tf.cast(tf.not_equal(speakers, first), tf.int32), dialogue_lengths)
        vectors = self.dialogue_encoder.embed_dialogues(tf.RaggedTensor.from_row_lengths(turns, dialogue_lengths),
                                                        roles)
        if self._normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1)
        return {OUTPUT_KEY: vectors}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=TEXT_INPUT)])
    def serve_text(self, text):
        return {OUTPUT_KEY: self.encoder.embed_texts(text, self._normalize)}

    @tf.function(input_signature=[
        tf.TensorSpec([None, None], tf.int32, name="token_ids"),
        tf.TensorSpec([None, None], tf.int32, name="padding_mask"),
    ])
    def serve_tokens(self, token_ids, padding_mask):
        # Unchecked, a shorter mask silently cuts the ids and a negative id reads a garbage row.
        checks = [
            tf.debugging.assert_equal(tf.shape(token_ids), tf.shape(padding_mask),
                                      message="token_ids and padding_mask must have one shape [batch, length]"),
            tf.debugging.assert_non_negative(token_ids, message="token_ids must be >= 0"),
            tf.debugging.assert_equal(tf.reduce_all((padding_mask == 0) | (padding_mask == 1)), True,
                                      message="padding_mask must hold only 0 and 1"),
        ]
        with tf.control_dependencies(checks):
            token_ids, padding_mask = tf.identity(token_ids), tf.identity(padding_mask)
        return {OUTPUT_KEY: self.encoder.embed_tokens(token_ids, padding_mask, self._normalize)}


def _assert_two_speakers(speakers, dialogue_lengths):
    """Refuses a dialogue with other than two distinct speakers, as `DialogueEncoder` does."""
    dialogue_ids = tf.repeat(tf.range(tf.size(dialogue_lengths, out_type=tf.int64)), dialogue_lengths)
    # A dialogue's index (digits only) and a speaker never run together ambiguously.
    pairs, pair_index = tf.unique(tf.strings.join([tf.strings.as_string(dialogue_ids), speakers], separator=":"))
    owners = tf.math.unsorted_segment_min(dialogue_ids, pair_index, tf.size(pairs))
    counts = tf.math.unsorted_segment_sum(tf.ones_like(owners), owners, tf.size(dialogue_lengths))
    bad = tf.where(counts != 2)[:, 0]
    return tf.debugging.Assert(
        tf.size(bad) == 0, ["every dialogue needs exactly two speakers; indices of the dialogues that have not:", bad],
        summarize=10)


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    checkpoint: str
    export_dir: str
    max_seq_length: int = 128
    pooling: str | None = None  # None: the checkpoint's own (`checkpoints.sentence_pooling`)
    normalize: bool = False
    version: int | None = None
    dialogue_max_seq_length: int | None = None
    dialogue_pooling: str = "interlocutor"
    precision: str = "float32"  # the graph's compute precision (`precision`); the vectors are float32


def _refuse_xla(folder: str) -> None:
    """TF Serving runs XLA on CPU only behind its experimental --xla_cpu_compilation_enabled, so a
    graph holding XLA-compiled functions (a bfloat16 backbone's islands) is not exported."""
    with open(os.path.join(folder, "saved_model.pb"), "rb") as reader:
        if b"_XlaMustCompile" in reader.read():
            raise ValueError("the encoder's graph holds XLA-compiled functions (a bfloat16 backbone's islands), which "
                             "TF Serving does not run by default: export with run_export, or an encoder whose backbone "
                             "had encoder.backbone.set_compiled_elementwise(backbone, False) before its first call")


def export_savedmodel(encoder: SentenceEncoder, export_dir: str, normalize: bool = False,
                      version: int | None = None, dialogue_encoder: DialogueEncoder | None = None,
                      describe=None) -> str:
    """Writes `export_dir/<version>/`, the layout TF Serving expects; returns that path.

    The SavedModel is written beside its final name and renamed into place, so a serving
    process polling `export_dir` never sees a half-written version.

    Args:
      encoder: the sentence encoder the text and token signatures run.
      export_dir: the model base folder TF Serving is given.
      normalize: L2-normalize the served vectors.
      version: the version folder's number; default: one above the highest in `export_dir`.
      dialogue_encoder: serves the dialogue signature; default: interlocutor pooling over the
        backbone's full length, the release's first tokens and all-zero token types.
      describe: called with the version folder before it is renamed into place, to write the
        files that describe it (`run_export`: its settings and model card), so they appear with it.

    Returns:
      The version folder's path.

    Raises:
      ValueError: if the graph holds XLA-compiled functions (`_refuse_xla`); nothing is written.
    """
    version = next_version(export_dir) if version is None else version
    target = os.path.join(export_dir, str(version))
    if os.path.exists(target):
        raise FileExistsError(f"{target} exists; TF Serving versions are immutable, pick another version")
    os.makedirs(export_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=export_dir)
    try:
        dialogue_encoder = dialogue_encoder or DialogueEncoder(encoder.backbone, encoder.tokenizer,
                                                               encoder.backbone.max_sequence_length)
        module = _ExportModule(encoder, normalize, dialogue_encoder)
        tf.saved_model.save(
            module, staging,
            signatures={
                SERVING_SIGNATURE: module.serve_text.get_concrete_function(),
                TOKENS_SIGNATURE: module.serve_tokens.get_concrete_function(),
                DIALOGUES_SIGNATURE: module.serve_dialogues.get_concrete_function(),
            },
        )
        _refuse_xla(staging)
        if describe is not None:
            describe(staging)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def run_export(config: ExportConfig) -> str:
    """Exports `config.checkpoint` as a SavedModel version with its `export_config.json` and model card.

    Args:
      config: the checkpoint, the export folder and the served settings.

    Returns:
      The version folder's path.
    """
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint, sentence_pooling
    from dialoguecse_tf.serving.model_card import card, checkpoint_facts, write_card

    loaded = load_checkpoint(config.checkpoint, max_seq_length=config.max_seq_length, precision=config.precision)
    # TF Serving runs XLA on CPU only behind its experimental --xla_cpu_compilation_enabled, so the
    # graph keeps plain ops where bfloat16 training and encode() run XLA-compiled islands.
    set_compiled_elementwise(loaded.backbone, False)
    encoder = SentenceEncoder(loaded.backbone, loaded.tokenizer, pooling=sentence_pooling(loaded, config.pooling))
    # The dialogue signature reads dialogues as the encoder's training did (a dial2vec run's
    # truncation and token types, recorded in its metadata).
    dialogue_encoder = DialogueEncoder(loaded.backbone, loaded.tokenizer,
                                       config.dialogue_max_seq_length or loaded.backbone.max_sequence_length,
                                       config.dialogue_pooling, **dialogue_settings(loaded.metadata))
    version = next_version(config.export_dir) if config.version is None else config.version
    model_path = f"{os.path.basename(os.path.normpath(config.export_dir))}/{version}"
    text = card("savedmodel", checkpoint_facts(config.checkpoint, loaded.metadata), encoder.pooling,
                config.max_seq_length, model_path, normalize=config.normalize)

    def describe(folder):
        write_config(dataclasses.replace(config, pooling=encoder.pooling), folder, EXPORT_CONFIG_FILE)
        write_card(folder, text)

    return export_savedmodel(encoder, config.export_dir, config.normalize, version, dialogue_encoder, describe)


class ExportedEncoder:
    """Embeds texts with an exported SavedModel (e.g. in a process without the library's models)."""

    def __init__(self, path: str):
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

        self.path = path = export_version_dir(path)
        self.settings = export_settings(path)
        self._module = tf.saved_model.load(path)
        signatures = self._module.signatures
        self._serve = signatures[SERVING_SIGNATURE]
        self._serve_dialogues = signatures.get(DIALOGUES_SIGNATURE)
        self.dimension = int(self._serve.structured_outputs[OUTPUT_KEY].shape[-1])

    def count_unknown(self, texts) -> tuple[int, int]:
        """([UNK] pieces, word pieces) of `texts` by the export's own tokenizer, as
        `Tokenizer.count_unknown` counts them. The export keeps no vocabulary file: a private-use
        character, in no BERT vocabulary, gives the [UNK] id."""
        from dialoguecse_tf.encoder.tokenization import count_unknown

        tokenize = self._module.tokenizer.tokenize
        unk_id = int(tokenize(tf.constant(["\ue000"])).flat_values.numpy()[0])
        return count_unknown(tokenize, unk_id, texts)

    def encode_dialogues(self, dialogues, batch_size: int = 16) -> np.ndarray:
        """Embeds `Dialogue`s (or (speaker, text) sequences) through the dialogue signature."""
        if self._serve_dialogues is None:
            raise ValueError(f"{self.path}: exported without the {DIALOGUES_SIGNATURE} signature")
        items = [dialogue_turns(dialogue) for dialogue in dialogues]

        def embed(batch):
            turns = [text for i in batch for text in items[i][0]]
            speakers = [str(role) for i in batch for role in items[i][1]]
            return self._serve_dialogues(turns=tf.constant(turns, tf.string), speakers=tf.constant(speakers),
                                         dialogue_lengths=tf.constant([len(items[i][0]) for i in batch],
                                                                      tf.int32))[OUTPUT_KEY].numpy()

        return encode_in_batches(list(range(len(items))), embed, self.dimension, batch_size, sort_by_length=False)

    def encode(self, texts, batch_size: int = 64, verbose: bool = False, sort_by_length: bool = True) -> np.ndarray:
        return encode_in_batches(
            texts, lambda batch: self._serve(**{TEXT_INPUT: tf.constant(batch, tf.string)})[OUTPUT_KEY].numpy(),
            self.dimension, batch_size, sort_by_length, verbose,
        )
