"""The `README.md` model card every export writes, as sentence-transformers' `save()` writes one.

A card opens with the YAML block the HuggingFace Hub reads, then says what the checkpoint and its
training run record, and how to load the export. Everything it states is read from files:

- the checkpoint's `dialoguecse_checkpoint.json` (the stage's metadata: objective, its options,
  pooling, steps, the last step's logs, and for a `best_encoder` the evaluation that chose it);
- the run's `config.json` beside the encoder folder, only when its settings digest is the one
  the encoder records (so a config.json of another run never describes this encoder): the start
  checkpoint, training records, batch size, learning rate, sequence length and seed;
- the `records_info.json` of the training records (record type, examples, dialogues).

A section whose facts are absent is left out. `base_model` is written only when the start
checkpoint is a HuggingFace Hub download (its cache folder `models--ORG--NAME` names the repo);
`language`, `datasets` and `license` only when recorded, and a run records none of them as the
Hub reads them (ISO codes, Hub dataset ids, licence identifiers), so the card leaves them out
rather than guess. The SavedModel card has no `library_name`: the Hub names modelling libraries
there, and a SavedModel is a file format that plain TensorFlow loads.

Each card's Python snippets set `model_path` to the export folder as named when written (run
them from its parent folder, or put in its path or Hub id) and end with `embeddings`, float32
[len(texts), hidden size]: tests run them as written.
"""

import os
import re

import yaml

from dialoguecse_tf.encoder.checkpoints import CHECKPOINT_MARKER_FILE
from dialoguecse_tf.io_utils import atomic_open, read_json_object
from dialoguecse_tf.objectives.registry import get_objective_class
from dialoguecse_tf.records.spec import RECORDS_INFO_FILE
from dialoguecse_tf.stage_config import CONFIG_FILE, SETTINGS_DIGEST_KEY, settings_digest

CARD_FILE = "README.md"

_HUB_CACHE_FOLDER = re.compile(r"models--([\w.-]+)--([\w.-]+)")
_EXAMPLE_TEXTS = '["where is my order?", "I would like a refund, please."]'
_POOLING_TEXT = {
    "mean": "the mean of the last layer's token vectors over the real (unpadded) tokens",
    "cls": "the last layer's [CLS] vector",
    "pooler": "BERT's pooler output (the [CLS] vector through the pooler's dense layer and tanh)",
}


def checkpoint_facts(path: str, metadata: dict) -> dict:
    """What a checkpoint and its training run record, for `card`.

    Args:
      path: the checkpoint folder an export reads.
      metadata: the loaded checkpoint's metadata (`LoadedCheckpoint.metadata`).

    Returns:
      {"source": folder name, "metadata": `metadata`, "run": the run's config.json record or {},
       "records": the training records' records_info.json or {}, "base_model": Hub id or None}.
    """
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    run = _run_record(folder, metadata)
    start = run.get("init_checkpoint") or ""
    hub = _HUB_CACHE_FOLDER.search(start)
    return {"source": os.path.basename(os.path.normpath(path)), "metadata": metadata, "run": run,
            "records": _records_info(run), "base_model": f"{hub.group(1)}/{hub.group(2)}" if hub else None}


def _run_record(folder: str, metadata: dict) -> dict:
    digest = metadata.get(SETTINGS_DIGEST_KEY)
    path = os.path.join(os.path.dirname(os.path.abspath(folder)), CONFIG_FILE)
    if not digest or not os.path.isfile(os.path.join(folder, CHECKPOINT_MARKER_FILE)) or not os.path.isfile(path):
        return {}
    try:
        record = read_json_object(path, "a training config.json")
        return record if settings_digest(record) == digest else {}
    except (ValueError, TypeError, KeyError, OSError):
        return {}


def _records_info(run: dict) -> dict:
    patterns = run.get("train_file") or []
    if not patterns:
        return {}
    path = os.path.join(os.path.dirname(patterns[0]), RECORDS_INFO_FILE)
    try:
        return read_json_object(path, "a records_info.json") if os.path.isfile(path) else {}
    except (ValueError, OSError):
        return {}


def card(export_format: str, facts: dict, pooling: str, max_seq_length: int, model_path: str,
         normalize: bool = False, notes: tuple = ()) -> str:
    """The model card of one export.

    Args:
      export_format: "huggingface", "keras_hub" or "savedmodel".
      facts: `checkpoint_facts` of the exported checkpoint.
      pooling: the export's sentence pooling (`pooling.POOLING_MODES`).
      max_seq_length: tokens per text the export truncates to.
      model_path: the export folder as its snippets name it (for a SavedModel, its version folder).
      normalize: the SavedModel's vectors are L2-normalized.
      notes: sentences for the card's "Export" section (e.g. a recorded numeric drift).

    Returns:
      The card's text: a YAML block between "---" lines, then Markdown.
    """
    header = {"huggingface": ("sentence-transformers", "sentence-similarity",
                              ["sentence-transformers", "sentence-similarity", "feature-extraction", "transformers"]),
              "keras_hub": ("keras-hub", "feature-extraction", ["keras-hub", "keras", "feature-extraction"]),
              "savedmodel": (None, "feature-extraction", ["tensorflow", "saved_model", "feature-extraction"])}
    library, pipeline, tags = header[export_format]
    objective = facts["metadata"].get("objective")
    metadata = {"base_model": facts["base_model"], "library_name": library, "pipeline_tag": pipeline,
                "tags": tags + ["dialoguecse_tf"] + ([objective] if objective else [])}
    block = yaml.safe_dump({key: value for key, value in metadata.items() if value is not None}, sort_keys=False,
                           allow_unicode=True)
    sections = [f"# {facts['source']}\n\n{_summary(export_format, facts, pooling, max_seq_length, normalize)}"]
    sections += [text for text in (_training(facts), _evaluation(facts["metadata"])) if text]
    if notes:
        sections.append("## Export\n\n" + " ".join(notes))
    sections.append(_usage(export_format, pooling, max_seq_length, model_path))
    return f"---\n{block}---\n\n" + "\n\n".join(sections) + "\n"


def write_card(folder: str, text: str) -> str:
    """Writes `text` as `folder/README.md`, atomically; returns the path."""
    path = os.path.join(folder, CARD_FILE)
    with atomic_open(path, "w", encoding="utf-8") as writer:
        writer.write(text)
    return path


def _summary(export_format, facts, pooling, max_seq_length, normalize) -> str:
    kind = {"huggingface": "a HuggingFace BERT folder with sentence-transformers modules",
            "keras_hub": "a keras-hub `BertBackbone` preset", "savedmodel": "a TensorFlow SavedModel"}[export_format]
    text = (f"A BERT sentence encoder exported by dialoguecse_tf as {kind}, from the checkpoint "
            f"`{facts['source']}`. A text's embedding is {_POOLING_TEXT[pooling]}; texts are cut to "
            f"{max_seq_length} word pieces ([CLS] and [SEP] included).")
    if normalize:
        text += " The served vectors are L2-normalized."
    if facts["base_model"]:
        text += f" Trained from [{facts['base_model']}](https://huggingface.co/{facts['base_model']})."
    return text


def _paper(objective: str) -> tuple:
    """(name, citation, link) of a registered objective's paper; (objective, None, None) for an
    objective without one or no longer registered (a checkpoint of an older version)."""
    try:
        return get_objective_class(objective).paper or (objective, None, None)
    except ValueError:
        return objective, None, None


def _training(facts: dict) -> str:
    metadata, run, records = facts["metadata"], facts["run"], facts["records"]
    objective = metadata.get("objective")
    if not objective:
        return ""
    name, citation, link = _paper(objective)
    lines = [f"- Objective: `{objective}` ({name})" + (f", from {citation} ({link})." if citation else ".")]
    options = run.get("options") or {}
    if options:
        lines.append("- Objective settings: " + ", ".join(f"{key} {value}" for key, value in sorted(options.items()))
                     + ".")
    if run:
        start = run.get("init_checkpoint")
        lines.append(f"- Started from `{_folder_name(start)}`." if start else
                     "- Started from a random initialisation.")
    if records or run.get("train_file"):
        data = f"- Training data: the `{records.get('record_type', 'training')}` records"
        if run.get("train_file"):
            data += f" in `{_folder_name(os.path.dirname(run['train_file'][0]))}`"
        stats = records.get("stats", {})
        counts = [f"{stats[key]:,} {label}" for key, label in (("samples_written", "examples"),
                                                               ("dialogues_kept", "dialogues"))
                  if isinstance(stats.get(key), int)]
        lines.append(data + (f": {' from '.join(counts)}" if counts else "") + ".")
    steps = [f"{metadata['num_train_steps']:,} steps"] if isinstance(metadata.get("num_train_steps"), int) else []
    steps += [f"{label} {run[key]}" for key, label in (("train_batch_size", "batch size"),
                                                        ("learning_rate", "peak learning rate"),
                                                        ("max_seq_length", "max_seq_length"),
                                                        ("random_seed", "seed")) if run.get(key) is not None]
    if steps:
        lines.append("- Training: " + ", ".join(steps) + ".")
    loss = metadata.get("final_logs", {}).get("loss")
    if isinstance(loss, (int, float)):
        lines.append(f"- Training loss at the last step: {loss:.6g}.")
    return "## Training\n\n" + "\n".join(lines)


def _evaluation(metadata: dict) -> str:
    if isinstance(metadata.get("eval"), dict):
        results = metadata["eval"]
        intro = (f"The run's evaluation at step {metadata.get('step')}, where it scored best by "
                 f"`{metadata.get('selected_by')}` (this checkpoint is that step's):")
    else:
        results = {key[len("eval_"):]: value for key, value in metadata.get("final_logs", {}).items()
                   if key.startswith("eval_")}
        intro = "The run's evaluation at its last step:"
    rows = [f"| {name} | {value:.6g} |" for name, value in results.items() if isinstance(value, (int, float))]
    if not rows:
        return ""
    return f"## Evaluation\n\n{intro}\n\n| metric | value |\n|---|---|\n" + "\n".join(rows)


def _folder_name(path: str) -> str:
    """The last two parts of a path: enough to name a folder, without this machine's layout."""
    parts = os.path.normpath(path).split(os.sep)
    return "/".join(part for part in parts[-2:] if part)


def _usage(export_format, pooling, max_seq_length, model_path) -> str:
    opening = f'model_path = "{model_path}"  # this folder, seen from its parent; or its path, or Hub id\n' \
              f"texts = {_EXAMPLE_TEXTS}\n"
    project = ("### TensorFlow, with dialoguecse_tf\n\nThis project's loader, with the encoder's original numerics:\n\n"
               "```python\nfrom dialoguecse_tf.encoder.sentence import SentenceEncoder\n\n" + opening
               + f"encoder = SentenceEncoder.from_checkpoint(model_path, max_seq_length={max_seq_length})\n"
               "embeddings = encoder.encode(texts)\n```")
    if export_format == "huggingface":
        pooled = {"mean": 'mask = batch["attention_mask"].unsqueeze(-1).to(output.last_hidden_state.dtype)\n'
                          "embeddings = ((output.last_hidden_state * mask).sum(1) / mask.sum(1)).numpy()\n",
                  "cls": "embeddings = output.last_hidden_state[:, 0].numpy()\n",
                  "pooler": "embeddings = output.pooler_output.numpy()\n"}[pooling]
        return ("## Usage\n\n### sentence-transformers\n\n```python\nfrom sentence_transformers import "
                "SentenceTransformer\n\n" + opening + "model = SentenceTransformer(model_path)\n"
                "embeddings = model.encode(texts)\n```\n\n### transformers\n\n```python\nimport torch\n"
                "from transformers import AutoModel, AutoTokenizer\n\n" + opening
                + "tokenizer = AutoTokenizer.from_pretrained(model_path)\nmodel = AutoModel.from_pretrained(model_path)\n"
                f'batch = tokenizer(texts, padding=True, truncation=True, max_length={max_seq_length}, '
                'return_tensors="pt")\nwith torch.no_grad():\n    output = model(**batch)\n' + pooled
                + "```\n\n" + project)
    if export_format == "keras_hub":
        pooled = {"mean": 'mask = np.asarray(inputs["padding_mask"], dtype="float32")[..., None]\n'
                          'embeddings = (np.asarray(outputs["sequence_output"]) * mask).sum(1) / mask.sum(1)\n',
                  "cls": 'embeddings = np.asarray(outputs["sequence_output"])[:, 0]\n',
                  "pooler": 'embeddings = np.asarray(outputs["pooled_output"])\n'}[pooling]
        return ("## Usage\n\n### keras-hub\n\n```python\nimport keras_hub\nimport numpy as np\n\n" + opening
                + "backbone = keras_hub.models.BertBackbone.from_preset(model_path)\n"
                f"preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(model_path, "
                f"sequence_length={max_seq_length})\ninputs = preprocessor(texts)\noutputs = backbone(inputs)\n"
                + pooled + "```\n\n" + project)
    return ("## Usage\n\nThe SavedModel's signatures:\n\n"
            "| signature | inputs | output |\n|---|---|---|\n"
            "| `serving_default` | `text`: string [batch] | `embedding`: float32 [batch, hidden size] |\n"
            "| `embed_tokens` | `token_ids`, `padding_mask`: int32 [batch, length] | `embedding` |\n"
            "| `embed_dialogues` | `turns`, `speakers`: string [turns]; `dialogue_lengths`: int32 [dialogues] "
            "| `embedding`: float32 [dialogues, hidden size] |\n\n"
            "TF Serving serves the export folder (this folder's parent), the highest version. In Python, with "
            "tensorflow-text installed for the in-graph tokenizer:\n\n"
            "```python\nimport tensorflow as tf\nimport tensorflow_text  # noqa: F401  (registers the tokenizer "
            "ops)\n\n" + opening + "model = tf.saved_model.load(model_path)\n"
            'embeddings = model.signatures["serving_default"](text=tf.constant(texts))["embedding"].numpy()\n```')
