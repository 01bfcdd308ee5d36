"""Benchmark 1: sentences/s of `encode()` and of the exported SavedModel vs HF transformers.

Both sides hold the same weights (one HuggingFace BERT folder loaded by each), embed the
same sentences at the same batch size and maximum length, and mean-pool. Before timing,
the vectors are compared (max abs diff must stay under --max_abs_diff). Two input regimes:

* `padded`: every batch padded to --max_seq_length on both sides (the plain path);
* `fast`: both sides sort sentences by length and pad each batch to its longest
  sentence (the project's default `encode()`; on the HF side, what sentence-transformers
  does), so neither pays for padding the other skips.

Candidates run alternately in one process; the table gives median sentences/s and the
ratio to the PyTorch peer of the same regime.
"""

import atexit
import shutil
import tempfile

from absl import app, flags

from benchmarks import common

common.define_flags(repeats=5, hf_folder=True)
flags.DEFINE_string("texts_file", None, "One sentence per line; default: utterances of the project's demo corpus.")
flags.DEFINE_integer("num_sentences", 512, "Sentences embedded per timed pass.")
flags.DEFINE_integer("batch_size", 64, "Sentences per batch, both sides.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per sequence at most (with [CLS] and [SEP]).")
flags.DEFINE_float("max_abs_diff", 1e-3, "Largest allowed difference between the two sides' vectors.")

FLAGS = flags.FLAGS


def load_texts(texts_file, num_sentences):
    if texts_file:
        with open(texts_file, encoding="utf-8") as reader:
            texts = [line.strip() for line in reader if line.strip()]
    else:
        from dialoguecse_tf.data.demo import generate_dialogues

        texts = list(dict.fromkeys(turn.text for d in generate_dialogues(2000, seed=7) for turn in d.turns))
    if len(texts) < num_sentences:
        raise ValueError(f"need {num_sentences} sentences, found {len(texts)}")
    return texts[:num_sentences]


class HuggingFaceEncoder:
    """The PyTorch peer: BertTokenizerFast + BertModel + masked mean pooling."""

    def __init__(self, folder, max_seq_length):
        import torch
        import transformers

        from benchmarks.torch_peer import TorchSentenceEncoder, load_bert

        self.torch = torch
        self.tokenizer = transformers.BertTokenizerFast.from_pretrained(folder)
        self.model = TorchSentenceEncoder(load_bert(folder))
        self.max_seq_length = max_seq_length

    def embed_batch(self, texts, padding):
        inputs = self.tokenizer(texts, padding=padding, truncation=True, max_length=self.max_seq_length,
                                return_tensors="pt", return_token_type_ids=False)
        return self.model(inputs["input_ids"], inputs["attention_mask"]).numpy()

    def encode(self, texts, batch_size, fast):
        from dialoguecse_tf.encoder.sentence import encode_in_batches

        padding = "longest" if fast else "max_length"
        return encode_in_batches(texts, lambda batch: self.embed_batch(batch, padding), 0, batch_size,
                                 sort_by_length=fast)


def main(argv):
    del argv
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint
    from dialoguecse_tf.encoder.sentence import SentenceEncoder
    from dialoguecse_tf.serving.savedmodel import ExportedEncoder, export_savedmodel

    folder = FLAGS.hf_folder or common.default_hf_folder()
    texts = load_texts(FLAGS.texts_file, FLAGS.num_sentences)
    loaded = load_checkpoint(folder, max_seq_length=FLAGS.max_seq_length)
    ours = {
        "padded": SentenceEncoder(loaded.backbone, loaded.tokenizer, trim_padding=False),
        "fast": SentenceEncoder(loaded.backbone, loaded.tokenizer),
        "fast+xla": SentenceEncoder(loaded.backbone, loaded.tokenizer, jit_compile=True),
    }
    export_dir = tempfile.mkdtemp(prefix="encode-bench-")
    # Scratch: each call's SavedModel would otherwise stay behind in the temporary folder.
    atexit.register(shutil.rmtree, export_dir, ignore_errors=True)
    saved = ExportedEncoder(export_savedmodel(ours["fast"], export_dir))
    peer = HuggingFaceEncoder(folder, FLAGS.max_seq_length)
    batch = FLAGS.batch_size

    candidates = {
        "tf encode() padded": lambda: ours["padded"].encode(texts, batch, sort_by_length=False),
        "torch padded": lambda: peer.encode(texts, batch, fast=False),
        "tf encode() fast": lambda: ours["fast"].encode(texts, batch),
        "tf encode() fast+xla": lambda: ours["fast+xla"].encode(texts, batch),
        "tf SavedModel fast": lambda: saved.encode(texts, batch),
        "torch fast": lambda: peer.encode(texts, batch, fast=True),
    }
    peers = {"tf encode() padded": "torch padded", "tf encode() fast": "torch fast",
             "tf encode() fast+xla": "torch fast", "tf SavedModel fast": "torch fast"}

    our_ids = loaded.tokenizer(texts)["token_ids"].numpy()
    hf_ids = peer.tokenizer(texts, padding="max_length", truncation=True, max_length=FLAGS.max_seq_length)["input_ids"]
    id_mismatches = int(sum(list(a) != list(b) for a, b in zip(our_ids, hf_ids)))
    reference = candidates["torch padded"]()
    differences = {name: common.max_abs_diff(run(), reference) for name, run in candidates.items()}
    worst = max(differences.values())
    print(f"tokenization: {id_mismatches} of {len(texts)} sentences tokenized differently; "
          f"max abs diff of the vectors: {worst:.2e}")
    if worst >= FLAGS.max_abs_diff:
        raise SystemExit(f"error: the two sides disagree (max abs diff {worst:.2e} >= {FLAGS.max_abs_diff}); not timing")

    times = common.time_alternating(candidates, FLAGS.repeats, warmup=0)
    rows, results = [], {}
    for name, seconds in times.items():
        summary = common.summarize(seconds)
        summary["sentences_per_s"] = len(texts) / summary["median_s"]
        results[name] = summary
    for name, summary in results.items():
        peer_name = peers.get(name)
        ratio = summary["sentences_per_s"] / results[peer_name]["sentences_per_s"] if peer_name else None
        summary["ratio_to_torch"] = ratio
        rows.append([name, summary["sentences_per_s"], summary["min_s"], summary["max_s"],
                     f"{ratio:.2f}x" if ratio else "-", f"{differences[name]:.1e}"])
    common.print_table(
        f"Encoding throughput: {len(texts)} sentences, batch {batch}, max_seq_length {FLAGS.max_seq_length}, "
        f"median of {FLAGS.repeats}",
        ["candidate", "sentences/s", "min s", "max s", "vs torch", "max|diff|"], rows,
    )
    common.write_results(common.results_path(FLAGS.output_json, "encode_throughput"), {
        "benchmark": "encode_throughput",
        "settings": {"hf_folder": folder, "num_sentences": len(texts), "batch_size": batch,
                     "max_seq_length": FLAGS.max_seq_length, "repeats": FLAGS.repeats,
                     "texts_file": FLAGS.texts_file or "demo corpus (seed 7)"},
        "token_id_mismatches": id_mismatches,
        "max_abs_diff": differences,
        "results": results,
        "peak_rss_mib": common.peak_rss_mib(),
    })


if __name__ == "__main__":
    app.run(main)
