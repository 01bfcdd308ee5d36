"""Every hand-written table of README.md, docs/ and benchmarks/README.md is declared here with the
committed file (or the paper) its numbers come from, and each of its rows must be found there;
every number of README.md's prose is declared with the sources of its paragraph. Tables that
copy a results file sit between `<!-- table: ... -->` markers instead: `dialoguecse-experiment
docs` writes them and tests/experiments/test_doc_tables.py checks them.

The hand-written tables and prose are pasted by hand, so a rerun that changes a results file (or a
slip while pasting) would otherwise leave the docs quoting numbers no committed file holds. A
table or README paragraph nobody declared fails, a declaration that no longer matches the doc
fails, and a row whose label cannot be found in its source fails unless the declaration names it
as unsourced, with the reason.

What is compared, by the kind of source:
- Markdown results tables (results/**.md): the decimal numbers of a row (e.g. "52.49 ± 0.47" gives
  52.49 and 0.47), in order, must be a subsequence of the source row's, matched by row label.
- JSON measurements (benchmarks/results/*.json): each cell is mapped to the field(s) it prints
  (`Fields`), and every number of the cell, integers included (counts, seconds, MiB, "13,385"),
  must equal its own field at the printed precision: 0.891 stands for [0.8905, 0.8915], 1,123
  for [1122.5, 1123.5]. A number the declaration names as not measured (with the reason) is not
  compared. test_a_changed_last_digit_fails_every_mapped_cell moves each number of these tables by
  one unit of its last digit and requires the check to refuse every one.
- Tests: a table of what the tests assert (docs/reliability.md) maps each of its numbers to the
  literal of a test file that states it (the row's tolerance 5e-5 must be a literal of the test the
  row names), or to a measured field, so a tolerance changed in either place fails.
- Papers: each decimal number of a transcribed paper row must appear in the paper's text. Without
  the papers folder (../shared/papers) those checks skip, saying so.
- README.md prose: every number outside tables and code blocks must be found in a source declared
  for its paragraph (a results file, a paper, a setting of experiments/*.yaml or a constant of the
  code) at the printed precision, an integer under 10 as an integer of the source; or be declared
  as no measurement (a version, "2 CPU cores", a citation's year) or as a known mismatch to fix,
  each with its reason.
"""

import csv
import dataclasses
import json
import re

import pytest
import yaml

from conftest import REPO_ROOT
from dialoguecse_tf.evaluation.tables import level

PAPERS = REPO_ROOT.parent / "shared" / "papers"
DOCS = ("README.md", "docs/usage.md", "docs/benchmark.md", "docs/results_ecd.md", "docs/english_track.md", "docs/dse.md",
        "docs/dial2vec.md", "docs/demo.md", "docs/reliability.md", "benchmarks/README.md")
DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?![\w.])")
# Any printed number: 13,385 / 0.891 / -0.06 / 2.4e-7 / 1.78x / a 4th / a version 2.20.1 (one token).
# A minus sign counts only after a space or bracket ("0-0.12 s" is 0 and 0.12); digits inside a
# word (HWU64, all-MiniLM-L6-v2, a commit e256c6c) are no number.
NUMBER = re.compile(r"(?:(?<=[\s(\[~])-)?(?<![\w.,])(?<!\w~)(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)*(?:e-?\d+)?"
                    r"(?=(?:x|st|nd|rd|th)?(?!\w))")
STUDY = "DialogueCSE_I2 / {} (1 seed)"


@dataclasses.dataclass(frozen=True)
class Table:
    doc: str
    heading: str
    ordinal: int  # 0-based, among the tables under the same heading
    line: int
    header: tuple
    rows: tuple  # of cell tuples
    generated: bool = False  # between table markers: written from a results file


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a table's numbers come from.

    kind: "results" (Markdown tables under results/: rows matched by label), "measurements"
    (JSON files: `fields` maps each cell to the fields it prints), "paper" (each number in the
    paper's text: `paper` names the file, or maps a row-label prefix to a file), "text" (no
    number to source: the table may hold no decimal number at all), "tests" (numbers are the
    tolerances and observations of the tests the table names: `stated` maps each row's cells to
    the literals that state them; `why` says so).
    """

    kind: str
    files: tuple = ()
    labels: dict = dataclasses.field(default_factory=dict)  # README label -> source label
    template: str = "{}"  # how an unmapped README label reads in the source
    skip_columns: tuple = ()  # headers of text or derived columns
    any_order: bool = False  # the doc orders the source's columns differently
    unsourced_rows: dict = dataclasses.field(default_factory=dict)  # label -> why it has no source
    paper: object = None
    why: str = ""
    fields: object = None  # measurements: a Fields
    stated: dict = dataclasses.field(default_factory=dict)  # tests: row label -> {header: specs, in order}


def _results(*files, **kwargs):
    return Source("results", files, **kwargs)


def _json(path):
    return json.loads((REPO_ROOT / path).read_text(encoding="utf-8"))


# ---- What a cell prints -------------------------------------------------------------------------
# A spec says which numbers a cell prints, in order: a JSON path of the table's source ("results/
# {}/median_s": `{}` is the row's key, or `{0}`, `{1}` its parts; a list item by index or by
# "key=value,..."; "alias:path" picks one of several files), a tuple of specs (the cell's numbers
# in order), a function of the row's field getter (a derived column), or one of the classes below.
# A field holding text stands for the numbers written in it; a list, for its numbers.

NOT_MEASURED = object()  # an expected number that is accepted as printed


@dataclasses.dataclass(frozen=True)
class Fixed:
    """A number the cell prints by definition, not a field (the peer against itself is 1.00x)."""

    value: float
    why: str


@dataclasses.dataclass(frozen=True)
class NotMeasured:
    """`count` numbers of the cell that no committed file holds, with the reason: a name (UTF-8),
    the history of a fix, or a known mismatch to fix (then `why` says so)."""

    why: str
    count: int = 1


class Stated:
    """The number(s) literals of a committed file state: each literal must occur in `path`, and the
    cell prints the literals' numbers in order, or `value` of them (a function of their list)."""

    def __init__(self, path, *literals, value=None):
        self.path, self.literals, self.value = path, literals, value

    def __repr__(self):
        return f"Stated({self.path!r}, {', '.join(map(repr, self.literals))})"


@dataclasses.dataclass(frozen=True)
class Field:
    """A field of a JSON file other than the table's own: a path, or a function of the file's data."""

    path: str
    field: object


@dataclasses.dataclass(frozen=True)
class Known:
    """A known mismatch to fix: the cell prints `printed` where `spec`'s field says otherwise. The
    cell must keep printing `printed` (any other change fails), and once the field prints as it
    the exception fails too, to be dropped."""

    spec: object
    printed: str
    why: str


@dataclasses.dataclass(frozen=True)
class Computed:
    """Numbers worked out from committed files or the code (a sum, a unit change, a count)."""

    what: str
    function: object  # () -> a number or a list of numbers


def constant(module, name):
    """A named constant of the code, e.g. constant("dialoguecse_tf.evaluation.prototypes", "SHOTS")."""
    def value():
        import importlib
        return getattr(importlib.import_module(module), name)
    return Computed(f"{module}.{name}", value)


def default_of(module, cls, name):
    """The default of a config field of the code, e.g. TrainConfig's num_length_buckets."""
    def value():
        import importlib
        fields = {field.name: field for field in dataclasses.fields(getattr(importlib.import_module(module), cls))}
        return fields[name].default
    return Computed(f"{module}.{cls}.{name}'s default", value)


def said(path, *indexes):
    """The numbers written in the text field at `path` (those at `indexes`, or all)."""
    def numbers(get):
        found = _numbers(get(path), markdown=False)
        return [_value(found[i]) for i in indexes] if indexes else [_value(n) for n in found]
    return numbers


def in_gib(path):
    return lambda get: get(path) / 1024


def giga(path):
    return lambda get: get(path) / 1e9


@dataclasses.dataclass(frozen=True)
class Fields:
    """How a measurements table's cells map to its JSON source.

    rows: a row label -> the row's key (filled into the `{}` of each path), or a function of the
    row's cells -> key; a key of None declares a row that holds no number (a second header row).
    columns: a header (or a column index, for empty headers) -> the spec of its cells. With rows a
    dict, the label column is the row's identity: a changed label is no declared row.
    cells: (row label or key, header) -> the spec of that one cell, over its column's.
    """

    rows: object
    columns: dict
    cells: dict = dataclasses.field(default_factory=dict)


# ---- The measurements tables: which field each cell prints -------------------------------------

ENCODE, SYNTHETIC, ECD = ("benchmarks/results/encode_throughput.json", "benchmarks/results/train_step_synthetic.json",
                          "benchmarks/results/train_step_ecd.json")

PEER_ITSELF = Fixed(1.0, "the peer against itself (its ratio_to_torch is null)")

ENCODE_THROUGHPUT = Fields(
    rows={"`encode()`, padded to 128": "tf encode() padded",
          "`encode()`, fast path (length-sorted, trimmed; the default)": "tf encode() fast",
          "`encode()`, fast path + XLA": "tf encode() fast+xla",
          "exported SavedModel, fast path": "tf SavedModel fast",
          "HF `BertModel`, padded": "torch padded",
          'HF `BertModel`, fast (length-sorted, `padding="longest"`)': "torch fast"},
    columns={"sentences/s": "results/{}/sentences_per_s", "vs PyTorch peer": "results/{}/ratio_to_torch"},
    cells={("tf encode() padded", "candidate"): "settings/max_seq_length",
           ("tf encode() padded", "vs PyTorch peer"): ("results/{}/ratio_to_torch",
                                                       "results/torch padded/sentences_per_s"),
           ("tf encode() fast", "vs PyTorch peer"): ("results/{}/ratio_to_torch", "results/torch fast/sentences_per_s"),
           ("torch padded", "vs PyTorch peer"): PEER_ITSELF, ("torch fast", "vs PyTorch peer"): PEER_ITSELF})


def _step_columns(alias):
    return (f"{alias}:results/{{}}/median_s", f"{alias}:results/{{}}/samples_per_s",
            f"{alias}:results/{{}}/sequences_per_s")


# Headers 1-4: synthetic lengths "s/step (samples/s, sequences/s)" and "vs peer", then the same on ECD.
TRAIN_STEP = Fields(
    rows={"TF, plain (`--num_length_buckets=1`)": "tf", "TF, XLA (`--jit_compile`)": "tf_xla",
          "TF, 4 length buckets (the default)": "tf_buckets", "PyTorch peer": "torch", "": None},
    columns={1: _step_columns("synthetic"), 2: "synthetic:results/{}/ratio_to_torch",
             3: _step_columns("ecd"), 4: "ecd:results/{}/ratio_to_torch"},
    cells={("tf_buckets", "step"): "synthetic:settings/num_length_buckets"})


def ms_per_sequence(get):
    return 1000 * get("{}/step_s") / get("{}/sequences_per_step")


def ms_per_1k_tokens(get):
    return 1e6 * get("{}/step_s") / get("{}/tokens_per_step")


def _scaling(sweep, cells=None):
    """One of section 3's tables: a row is the sweep's setting its first cell names."""
    return Fields(
        rows=lambda row: f"sweeps/{sweep}/{sweep}={row[0]}",
        columns={"turns": "{}/num_context_turns", "negatives": "{}/num_negatives", "max_seq_length": "{}/max_seq_length",
                 "sequences": "{}/sequences_per_step", "tokens": "{}/tokens_per_step", "s/step": "{}/step_s",
                 "ms/sequence": ms_per_sequence, "ms per 1k tokens": ms_per_1k_tokens, "peak RSS MiB": "{}/peak_rss_mib"},
        cells=cells or {})


SCALING_TURNS = _scaling("num_context_turns")
SCALING_LENGTHS = _scaling("max_seq_length")


FLOPS = Fields(
    rows={"float32 matmul 4096^3": "matmul", "MiniLM encoder (6 x 384)": "minilm encoder",
          "MiniLM encoder + XLA": "minilm encoder +xla",
          "BERT-base-shaped encoder (12 x 768, random weights)": "bert_base_shape encoder",
          "BERT-base-shaped encoder + XLA": "bert_base_shape encoder +xla", "MiniLM, PyTorch peer": "minilm torch peer"},
    columns={"GFLOP": giga("results/{}/flops"), "s": "results/{}/median_s", "GFLOP/s": giga("results/{}/flop_per_s"),
             "of matmul FLOP/s": "results/{}/fraction_of_matmul"},
    cells={("matmul", "candidate"): ("settings/matmul_size", Fixed(3, "n^3 multiply-adds of two n x n matrices")),
           ("minilm encoder", "candidate"): ("settings/models/minilm/num_hidden_layers",
                                             "settings/models/minilm/hidden_size"),
           ("bert_base_shape encoder", "candidate"): ("settings/models/bert_base_shape/num_hidden_layers",
                                                      "settings/models/bert_base_shape/hidden_size")})

DSE_STEP = Fields(
    rows={"one device": "one_device", "mirrored, 2 replicas on the 2 cores' logical CPUs": "mirrored"},
    columns={"s/step": "results/{}/median_s", "pairs/s": "results/{}/pairs_per_s", "texts/s": "results/{}/texts_per_s"},
    cells={("mirrored", "strategy"): ("settings/replicas_mirrored", "environment/cpu_count")})

DIAL2VEC_STEP = Fields(
    rows=lambda row: f"results/max_seq_length={_numbers(row[0])[0]}",
    columns={"dialogue length": "{}/max_seq_length", "s/step": "{}/step_s", "dialogues/s": "{}/dialogues_per_s",
             "peak RSS": in_gib("{}/peak_rss_mib")})

OBJECTIVE_STEPS = Fields(
    # A row is an objective (the label's first word) with the padding its third cell names.
    rows=lambda row: (row[0].split()[0], "buckets" if row[2].startswith("length buckets") else "padded"),
    columns={
        "shape": ("objectives/{0}/shape/train_batch_size", "objectives/{0}/shape/sequences_per_step",
                  "objectives/{0}/shape/max_seq_length", "objectives/{0}/shape/mean_tokens_per_sequence"),
        "padding": lambda get: [get("objectives/{0}/{1}/num_length_buckets")] if get.key[1] == "buckets" else [],
        "dropout timed": "objectives/{0}/{1}/timed_dropout",
        "first-step losses TF / PyTorch": ("objectives/{0}/{1}/first_step_losses/tf",
                                           "objectives/{0}/{1}/first_step_losses/torch"),
        "TF s/step": "objectives/{0}/{1}/tf/median_s", "PyTorch s/step": "objectives/{0}/{1}/torch/median_s",
        "TF speed over PyTorch": "objectives/{0}/{1}/ratio_tf_over_torch"})

ENGINES = {"single process": "single", "Beam DirectRunner": "beam"}
RECORD_BUILDING_RUNS = Fields(
    rows=lambda row: f"runs/record_type={row[0]},engine={ENGINES.get(row[1])},workers={row[2]}",
    columns={"workers": "{}/workers", "seconds": "{}/seconds", "dialogues/s": "{}/dialogues_per_second",
             "records/s": "{}/records_per_second", "peak memory MiB": "{}/peak_memory_mib"})

RECORD_BUILDING_PROJECTION = Fields(
    rows=lambda row: f"projection/by_record_type/{row[0]}",
    columns={"2-worker efficiency": "{}/two_worker_efficiency",
             **{f"{size}M on {workers} (h)": f"{{}}/hours/{size}M_dialogues/{workers}"
                for size in (10, 100) for workers in (8, 32, 128)}})

PAPER_SHAPE = Fields(
    rows=lambda row: f"results/preset={row[0].strip('`')}",
    columns={"max length": "{}/max_seq_length", "batch": "{}/train_batch_size",
             # "whole batch" is max_examples_per_pass 0.
             "examples per pass": lambda get: [get("{}/max_examples_per_pass")] if get("{}/max_examples_per_pass") else [],
             "s/step": "{}/s_per_step", "peak RSS MiB": "{}/peak_rss_mib"})


def _same(*paths):
    """The one value every number of the lists at `paths` has (NaN if they differ)."""
    def value(get):
        values = {v for path in paths for v in get(path)}
        return values.pop() if len(values) == 1 else float("nan")
    return value


PROBE, AT, NOW = "Probe (review finding)", "At f3fd348", "Now"
FINDING = said("now:probes/name={}/finding")
SHARDS = "before:probes/name={}/observed/shards_left"
RANKED_FIRST = "probes/name={}/observed/positive_ranked_first_by_step"
BEFORE_HUGE, NOW_HUGE = "huge:probes/name={}/observed/", "now:probes/name={}/observed/"
# docs/reliability.md's probes table: label -> (the probe's name in the files, {column: spec}).
PROBES = {
    "Training into a used `--output_dir` with other settings (#1)": ("resume_with_other_settings", {
        PROBE: FINDING, AT: "before:probes/name={}/runs/0/returncode"}),
    "Every layer frozen: the default `num_frozen_layers=6` on 6-layer MiniLM (#2, #3)": ("every_layer_frozen", {
        PROBE: (said("now:probes/name={}/expected", 0, 1), FINDING),
        AT: "before:probes/name={}/runs/0/returncode",
        # "--num_frozen_layers=3, the half the papers' 6 of 12 freeze"
        NOW: said("now:probes/name={}/runs/0/error_line", 2, 3, 4)}),
    # Finding #3 is the third run of the same probe (mean DialogueCSE's "in user code:").
    "An error inside a traced function (#3)": ("every_layer_frozen", {PROBE: said("now:probes/name={}/finding", 1)}),
    "Negative or infinite learning rate, batch size 0 (#8, #13)": ("invalid_settings", {
        PROBE: (said("now:probes/name={}/expected"), FINDING)}),
    "A collapsed encoder (learning rate 1e6) (#8)": ("collapsed_encoder_metric", {
        PROBE: (said("now:probes/name={}/expected", 0), FINDING),
        # "1.0 at steps 2 and 3": the value and the (1-based) steps that had it
        AT: ("before:" + RANKED_FIRST + "/1",
             lambda get: [step for step, value in enumerate(get("before:" + RANKED_FIRST), 1) if value == 1.0]),
        NOW: lambda get: max(get("now:" + RANKED_FIRST)[1:])}),
    "`dialoguecse-embed --export_dir` with `--normalize`, `--pooling=cls`, `--max_seq_length=8` (#4)": (
        "embed_export_flags", {
            PROBE: (said("now:probes/name={}/runs/3/command"), FINDING),
            AT: (lambda get: min(get("before:probes/name={}/observed/sentence_norms")),
                 lambda get: max(get("before:probes/name={}/observed/sentence_norms"))),
            NOW: _same("now:probes/name={}/observed/sentence_norms", "now:probes/name={}/observed/dialogue_norms")}),
    "HuggingFace export against the SavedModel, 16 sentences with full-width, CJK punctuation, ß, ligatures, "
    "circled digits, emoji, accents (#5)": ("huggingface_vs_savedmodel", {
        PROBE: ("now:probes/name={}/observed/sentences", FINDING),
        AT: ("before:probes/name={}/observed/max_abs_diff", "before:probes/name={}/observed/min_cosine"),
        NOW: (said("now:probes/name={}/expected"), "now:probes/name={}/observed/min_cosine")}),
    "SavedModel `embed_tokens` and `embed_dialogues` inputs (#9)": ("savedmodel_input_checks", {
        PROBE: FINDING,
        # "mask 2": the mask value fed, named by the probe's observed key mask_2
        AT: lambda get: [int(key.rpartition("_")[2]) for key in get("before:probes/name={}/observed")
                         if key.startswith("mask_")]}),
    "An SR set whose rows have no negative (#6)": ("sr_without_negatives", {PROBE: FINDING}),
    "One valid huge utterance among 200 dialogues, every record builder (#7)": ("huge_utterance", {
        PROBE: (said("now:probes/name={}/expected", 1), FINDING),
        AT: tuple(BEFORE_HUGE + field for field in (
            "utterance_mb", "contrastive/seconds", "contrastive/max_rss_mb", "pairs/seconds", "pretraining/seconds",
            "dialogues/seconds", "dialogues/max_rss_mb")) + (
            # the tensor the dial2vec builder failed to allocate, "2600 x 1818183"
            lambda get: [int(n) for n in re.search(r"shape\[(\d+),(\d+)\]",
                                                   get("huge:probes/name={}/runs/2/error_line")).groups()],),
        NOW: tuple(NOW_HUGE + field for field in (
            "utterance_mb", "contrastive/seconds", "contrastive/max_rss_mb", "pairs/seconds", "pairs/max_rss_mb",
            "dialogues/seconds", "dialogues/max_rss_mb", "pretraining/seconds", "pretraining/max_rss_mb")) + (
            Stated("dialoguecse_tf/data/preprocessing.py", "CHARS_PER_TOKEN = 100"),)}),
    "Data prep with `--num_shards=3`, then 1, into one folder (#11)": ("stale_shards", {
        PROBE: (said("now:probes/name={}/expected"), FINDING),
        # "4 shard files left (3 stale)": all of them, and those not of the last run's single shard
        AT: (lambda get: len(get(SHARDS)),
             lambda get: sum(not name.endswith("-of-00001.tfrecord") for name in get(SHARDS))),
        NOW: lambda get: len(get("now:probes/name={}/observed/shards_left"))}),
    "An output path that is a folder (#10)": ("output_checked_first", {PROBE: FINDING}),
    "Embedding output (#12)": ("embed_output_formats", {PROBE: FINDING}),
    "A 5-shot intent label with fewer than 5 training items (#13)": ("few_shot_label", {
        PROBE: (said("now:probes/name={}/expected", 0, 0), FINDING)}),
    "SGD's release quirk: a closing SYSTEM turn with an empty utterance": ("sgd_empty_turn", {
        NOW: "now:probes/name={}/observed/empty_turns_skipped"}),
    "The DialogueCSE release's quirk: an SR row repeating a positive id": ("sr_repeated_ids", {}),
}
NEW_USER_PROBES = Fields(rows={label: name for label, (name, _) in PROBES.items()}, columns={},
                         cells={(label, header): spec for label, (_, cells) in PROBES.items()
                                for header, spec in cells.items()})



# ---- The tests tables: the literal (or measured field) that states each number -------------------

CRASH, MULTI, BAD, FUZZ = ("tests/training/test_crash_safety.py", "tests/training/test_multi_worker.py",
                           "tests/repository/test_bad_input.py", "tests/repository/test_fuzz_parsers.py")
NUM_KILLS = Stated(CRASH, "NUM_KILLS = 3")
DETERMINISM, LOOP = "tests/training/test_determinism.py", "tests/training/test_loop.py"
STAGE_RUNS = "tests/stage_runs.py"  # the contrastive `setup` fixture the multi-worker test trains from
DETERMINISM_STEPS = Stated(DETERMINISM, "NUM_TRAIN_STEPS = 20")
NAN_AT_STEP_4 = Stated(LOOP, '"loss became nan at step 4"')
HISTORY = "what the test saw before the fix (the row's history; no committed file keeps it)"
UTF8 = NotMeasured("a name: UTF-8")
STEPS_5, ROLLED_BACK_TO_2 = Stated(MULTI, '"num_train_steps": 5'), Stated(MULTI, 'roll_back(str(multi / "checkpoints"), 2)')
WEIGHT_TOLERANCE = Stated(MULTI, "WEIGHT_TOLERANCE = 5e-5")
HEALTH = "dialoguecse_tf/training/health.py"
# docs/reliability.md's issue-48 table: row label -> {column: the specs of its numbers, in order}.
RUNNER_PROBES = {
    "A step linked from another experiment's run (`--reuse_under`) whose flags then change": {},
    "The runner SIGKILLed while a step trains": {
        "Tests that failed before the fix": Stated("tests/experiments/test_processes.py", "time.time() + 10")},
    "Two runners into one run folder": {},
    "A failing step": {},
    "A YAML syntax error": {},
    "`--dry_run` with a misspelt flag (`num_train_step`) or an input that does not exist": {
        "At a987c86": NotMeasured("exit status 0, a name")},
    "`--learning_rate=1e6`": {
        "Probe": NotMeasured("the probe's own setting, a name"),
        "At a987c86": NotMeasured("exit status 0, a name"),
        "Now": (Stated(HEALTH, "PROBE_SEQUENCES = 16"), Stated(HEALTH, "GROWTH_FACTOR = 100.0"),
                Stated(HEALTH, "COLLAPSE_FACTOR = 100.0"), Stated("dialoguecse_tf/stage.py", "10 * high"))},
    "A mixed Chinese/English corpus with MiniLM's vocabulary (about half its tokens `[UNK]`)": {
        "Now": Stated("dialoguecse_tf/encoder/tokenization.py", "UNKNOWN_WARN_RATE = 0.05",
                      value=lambda numbers: [round(100 * numbers[0])])},
    "Repeated dialogue ids": {},
    "CR-only line endings": {},
    "TensorFlow's `E ... failed call to cuInit` (no GPU) and oneDNN's `DT_INT64` line (on a CPU that has AVX-512F)": {
        "Now": NotMeasured("the environment variable's value, a name")},
    "Training's progress into a file": {},
}
# docs/reliability.md's first table: row label -> {column: the specs of its numbers, in order}.
RELIABILITY = {
    "Crash safety, pretraining": {
        "What was tried": (Stated("tests/stage_runs.py", "DROPOUT = 0.1"), NUM_KILLS,
                           Stated(CRASH, "rng.uniform(0.0, MAX_KILL_DELAY_S)"), Stated(CRASH, "MAX_KILL_DELAY_S = 0.12"),
                           # "a 4th kill": the NUM_KILLS mid-run kills and the one at the end
                           Stated(CRASH, "NUM_KILLS = 3", "range(NUM_KILLS + kill_at_end)", "kill_at_end=True",
                                  value=lambda numbers: numbers[0] + 1)),
        "What held": (Stated(CRASH, "atol=1e-6, err_msg=name"), Stated(CRASH, "atol=1e-5)"),
                      Stated(CRASH, "rel=1e-5")),
        "Fixed on the way": NotMeasured(HISTORY)},
    "Crash safety, contrastive stage": {"What was tried": NUM_KILLS},
    "Crash safety, checkpoint selection": {"What was tried": Stated("tests/test_stage.py", '"eval_steps": 4'),
                                           "Fixed on the way": NotMeasured(HISTORY, 2)},
    "Atomic outputs": {},
    "Determinism": {
        "What was tried": (DETERMINISM_STEPS, Stated(DETERMINISM, '"--log_steps=1"'),
                           DETERMINISM_STEPS, Stated(DETERMINISM, '"--eval_steps=10"'),
                           DETERMINISM_STEPS),
        "What held": DETERMINISM_STEPS},
    "NaN / inf": {"What was tried": NAN_AT_STEP_4,
                  "What held": (NAN_AT_STEP_4, NAN_AT_STEP_4, Stated(LOOP, 'endswith("ckpt-3")'))},
    "Multi-worker": {
        "What was tried": (Stated(MULTI, "num_workers: int = 2"), Stated(MULTI, '"127.0.0.1"'), STEPS_5,
                           Stated(STAGE_RUNS, "hidden_dropout_prob=0.0"), ROLLED_BACK_TO_2),
        "What held": (NotMeasured("worker names (worker 0 and worker 1)", 2),
                      Stated(STAGE_RUNS, "train_batch_size=8"), WEIGHT_TOLERANCE,
                      Stated(MULTI, "assert trained > 5e-3"), STEPS_5, Stated(MULTI, "atol=1e-5)"),
                      ROLLED_BACK_TO_2, WEIGHT_TOLERANCE),
        "Fixed on the way": Stated(LOOP, "np.testing.assert_allclose(b, a, atol=1e-6)")},
    "Bad input, every entry point": {
        "What was tried": (NotMeasured("the suite's size when the row was first written (history)", 3), UTF8),
        # The test asserts a non-zero status; the entry points' wrapper exits with 1.
        "What held": Stated("dialoguecse_tf/cli/flag_utils.py", "sys.exit(1)"),
        "Fixed on the way": (NotMeasured("the first run's failures when the row was written (history)", 2),
                             Stated(BAD, '"--num_sr_candidates=0"'), NotMeasured(HISTORY))},
    "Fuzzing the readers and parsers": {
        "What was tried": (Stated(FUZZ, "max_examples=300"), UTF8),
        "Fixed on the way": (
            # Python's limit is 4,300 digits; HUGE has one more.
            Stated(FUZZ, 'HUGE = "9" * 4301', value=lambda numbers: numbers[1] - 1), UTF8)},
}

def _speedup(faster, slower, value="median_s"):
    """How many times `faster`'s rate is `slower`'s (by their median seconds, or a rate field)."""
    if value == "median_s":
        return lambda data: data["results"][slower][value] / data["results"][faster][value]
    return lambda data: data["results"][faster][value] / data["results"][slower][value]


INPUT_PIPELINE = "benchmarks/results/input_pipeline.json"


def _pipeline_batches_per_s(data):
    return data["results"]["parallel + prefetch"]["batches_per_s"]


# benchmarks/README.md's fast-path table: its effects are the benchmarks' fields, its defaults the code's.
def _preset(task, preset, *names):
    """Fields of a fine-tuned task's preset (`FineTuneSettings`), as the settings table prints them."""
    module = f"dialoguecse_tf.evaluation.tasks.{task}"

    def value():
        import importlib
        settings = getattr(importlib.import_module(module), preset)
        return [getattr(settings, name) for name in names]
    return Computed(f"{module}.{preset}: {', '.join(names)}", value)


# docs/dse.md's table of the fine-tuned tasks' presets, cell by cell from the code.
FINETUNE_PRESETS = {
    label: {f"`{task}` {preset.lower()}": _preset(module, preset, *names)
            for task, module in (("intent_ft", "intent_finetune"), ("dialogue_act", "dialogue_act"))
            for preset in ("RELEASE", "CPU")}
    for label, names in (("learning rate, batch", ("learning_rate", "batch_size")),
                         ("at most epochs (the schedule's length)", ("max_epochs",)),
                         ("patience; validation every", ("patience", "eval_steps")),
                         ("dropout, tokens", ("dropout", "max_seq_length")),
                         ("runs", ("num_runs",)))}
FINETUNE_PRESETS["validation items a run"] = {"`intent_ft` cpu": _preset("intent_finetune", "CPU", "max_validation_items")}
FINETUNE_PRESETS["test items"] = {f"`{task}` cpu": _preset(module, "CPU", "max_test_items")
                                  for task, module in (("intent_ft", "intent_finetune"), ("dialogue_act", "dialogue_act"))}


FAST_PATH = {
    "trim padding to the batch's longest sentence": {"effect measured here": (
        Field(ENCODE, _speedup("tf encode() fast", "tf encode() padded", "sentences_per_s")),
        Field(ENCODE, lambda data: max(data["max_abs_diff"].values())))},
    "sort sentences by length before batching": {},
    "length buckets in the contrastive step": {
        "default": default_of("dialoguecse_tf.stage_config", "TrainConfig", "num_length_buckets"),
        "effect measured here": (Field(ECD, _speedup("tf_buckets", "tf")), Field(SYNTHETIC, _speedup("tf_buckets", "tf")),
                                 Stated("tests/models/test_models_dialoguecse.py", "np.asarray(expected), atol=1e-5)"))},
    "XLA": {"effect measured here": (
        Field(SYNTHETIC, _speedup("tf_xla", "tf")), Field(ECD, _speedup("tf_xla", "tf")),
        Field(ENCODE, _speedup("tf encode() fast+xla", "tf encode() fast", "sentences_per_s")),
        Field("benchmarks/results/flops.json", _speedup("bert_base_shape encoder +xla", "bert_base_shape encoder")))},
    "parallel parsing and prefetch": {"effect measured here": (
        Field(INPUT_PIPELINE, _speedup("parallel + prefetch", "sequential", "batches_per_s")),
        # The pipeline's batches/s over the fastest and the slowest training step's consumption.
        Field(INPUT_PIPELINE, lambda data: _pipeline_batches_per_s(data) / max(
            data["training_consumes_batches_per_s"].values())),
        Field(INPUT_PIPELINE, lambda data: _pipeline_batches_per_s(data) / min(
            data["training_consumes_batches_per_s"].values())))},
    "mixed precision": {},
}


HEADLINE = "## Headline: three methods on one benchmark"
ECD_MAIN = "### The main table: 3 seeds for the paper's key comparison"
STUDY_COLUMNS = ("What it changes", "Whose reading", "MAP against the mean", "MRR against the mean")
PAPER_TABLE_ROWS = {"DialogueCSE": "dialoguecse_emnlp2021.txt", "DSE": "dse_naacl2022.txt",
                    "dial2vec": "dial2vec_emnlp2022.md"}


def _measured(fields, *files):
    return Source("measurements", files, fields=fields)


RECORD_BUILDING = "benchmarks/results/record_building.json"
SECTION_9 = "### 9. Record building (a million demo dialogues; single process against Apache Beam)"

# (document, heading, ordinal) -> Source
DECLARED = {
    ("docs/benchmark.md", "## The papers' own numbers", 0): Source("paper", paper=PAPER_TABLE_ROWS),
    ("README.md", "## Layout", 0): Source("text"),
    ("README.md", "## Against the releases and sentence-transformers", 0): Source("text"),
    ("README.md", "## Documentation", 0): Source("text"),
    ("docs/results_ecd.md", ECD_MAIN, 1): Source("paper", paper="dialoguecse_emnlp2021.txt"),
    ("docs/english_track.md", "### Why DialogueCSE does not pull ahead here: the study on the English track", 0): _results(
        "results/sgd_minilm/study/table.md", template=STUDY, skip_columns=STUDY_COLUMNS,
        labels={"SiameseBERT_M, no MLM": "SiameseBERT_M / no MLM (1 seed)"}),
    ("docs/english_track.md", "### The same study on ECD", 0): _results(
        "results/ecd_cpu/study/table.md", template=STUDY, skip_columns=STUDY_COLUMNS,
        labels={"DialogueCSE_I2, main run (3 seeds)": "DialogueCSE_I2 (3 seeds)",
                "SiameseBERT_M, main run (3 seeds)": "SiameseBERT_M (3 seeds)"}),
    ("docs/dse.md", "### DSE on the English track: results", 0): _results(
        "results/dse_sgd_minilm/table.md", labels={"MiniLM (untouched)": "MiniLM"}, any_order=True),
    ("docs/dse.md", "### Fine-tuned evaluations: intent classification and dialogue action prediction", 0): Source(
        "tests", stated=FINETUNE_PRESETS, why="the presets of the code, each cell the fields it prints"),
    ("docs/reliability.md", "# Reliability: what was tried and what held", 0): Source(
        "tests", stated=RELIABILITY, why="each row names the test whose assertions and tolerances it states"),
    ("docs/reliability.md", "## The experiment runner and a new user's runs (the 2026-11b probes, issue 48)", 0): Source(
        "tests", stated=RUNNER_PROBES, why="each row names the test whose assertions it states"),
    ("docs/reliability.md", "## A new user's first runs (the 2026-11 probes)", 0): Source(
        "measurements", {"now": "benchmarks/results/new_user_probes.json",
                         "before": "benchmarks/results/new_user_probes_before.json",
                         "huge": "benchmarks/results/new_user_probes_before_huge.json"}, fields=NEW_USER_PROBES),
    ("benchmarks/README.md", "# Benchmarks", 0): Source("text"),
    ("benchmarks/README.md", "# Benchmarks", 1): Source("text"),  # the commands that remake merged scripts' results
    ("benchmarks/README.md", "### 1. Encoding throughput (512 demo-corpus sentences, batch 64, max length 128, "
     "5 repeats)", 0): _measured(ENCODE_THROUGHPUT, ENCODE),
    ("benchmarks/README.md", "### 2. Contrastive training step (batch 20, 3 turns, 10 candidates, L=50: 260 "
     "sequences/step; MiniLM, bottom 3 of 6 layers frozen; 5 x 3 steps)", 0): Source(
        "measurements", {"synthetic": SYNTHETIC, "ecd": ECD}, fields=TRAIN_STEP),
    ("benchmarks/README.md", "### 3. Scaling", 0): _measured(SCALING_TURNS, "benchmarks/results/scaling.json"),
    ("benchmarks/README.md", "### 3. Scaling", 1): _measured(_scaling("num_negatives"), "benchmarks/results/scaling.json"),
    ("benchmarks/README.md", "### 3. Scaling", 2): _measured(SCALING_LENGTHS, "benchmarks/results/scaling.json"),
    ("benchmarks/README.md", "### 4. Hardware utilisation (forward pass, batch 64 x 128 tokens, all real tokens; "
     "5 repeats)", 0): _measured(FLOPS, "benchmarks/results/flops.json"),
    ("benchmarks/README.md", "### 6. DSE training step (MiniLM, 64 synthetic pairs of at most 32 tokens, mean "
     "20.3; every layer trained; 5 x 3 steps)", 0): _measured(DSE_STEP, "benchmarks/results/dse_step.json"),
    ("benchmarks/README.md", "### 7. dial2vec training step (MiniLM, 4 dialogues x 5 sequences, window 10, bottom "
     "3 of 6 layers frozen; 3 x 2 steps)", 0): _measured(DIAL2VEC_STEP, "benchmarks/results/dial2vec_step.json"),
    ("benchmarks/README.md", "### 8. Every objective against PyTorch", 0): _measured(
        OBJECTIVE_STEPS, "benchmarks/results/objective_steps.json"),
    ("benchmarks/README.md", SECTION_9, 0): _measured(RECORD_BUILDING_RUNS, RECORD_BUILDING),
    ("benchmarks/README.md", SECTION_9, 1): _measured(RECORD_BUILDING_PROJECTION, RECORD_BUILDING),
    ("benchmarks/README.md", "## The papers' model shape", 0): _measured(PAPER_SHAPE, "benchmarks/results/paper_shape.json"),
    ("benchmarks/README.md", "## What the fast path is, and its flags", 0): Source(
        "tests", stated=FAST_PATH, why="the effects are the benchmarks above and the equality tests named in each row"),
}


# ---- README.md's prose: the sources of each paragraph's numbers ------------------------------------

@dataclasses.dataclass(frozen=True)
class Prose:
    """Where the numbers of a README.md paragraph come from.

    sources: committed files (results/, benchmarks/results/, experiments/, setup.py), "papers/NAME"
    (../shared/papers), "git:REV:PATH" (a committed file the paragraph names in history), or
    Computed. fixed: a printed number -> why it is no measurement. known: a printed number -> a
    known mismatch to fix (the doc is to change; then drop the entry).
    """

    sources: tuple = ()
    fixed: dict = dataclasses.field(default_factory=dict)
    known: dict = dataclasses.field(default_factory=dict)


def _stage_seconds(path, stages):
    with open(REPO_ROOT / path, encoding="utf-8") as reader:
        seconds = {name: float(value) for name, value in csv.reader(reader, delimiter="\t")}
    return sum(seconds[stage] for stage in stages)


def _demo_seconds():
    total = float(re.search(r"total wall seconds: (\d+)", (REPO_ROOT / "results/demo/command.txt").read_text(
        encoding="utf-8")).group(1))
    tsv = "results/demo/stage_seconds.tsv"
    return [total / 60, _stage_seconds(tsv, ("corpus", "contrastive_records", "pair_records", "dialogue_records")),
            _stage_seconds(tsv, ("export_savedmodel", "export_huggingface", "export_keras_hub"))]


def _paper_shape():
    results = _json("benchmarks/results/paper_shape.json")["results"]
    return [len(results), max(result["peak_rss_mib"] for result in results) / 1024]


def _dial2vec_candidates():
    from dialoguecse_tf.presets import PRESETS
    return PRESETS["paper_dial2vec"]["num_negatives"] + 1


def _data_ratios():
    """The papers' training data (DSE's appendix A.1: 892,835 consecutive pairs; dial2vec's table of
    datasets: SGD's 16,142 training dialogues; DialogueCSE's Table 1: ECD's 1,020,000 dialogues) over
    the benchmark's, in the order the README names them."""
    pairs = _json("results/dse_sgd_minilm/pairs_consecutive_prep_stats.json")["samples_written"]
    steps = yaml.safe_load((REPO_ROOT / "experiments/common/sgd.yaml").read_text(encoding="utf-8"))["steps"]
    sample = next(step for step in steps if step["name"] == "dialogue_records")["flags"]["max_dialogues"]
    dialogues = _json("results/ecd_cpu/mlm_prep_stats.json")["dialogues_read"]
    return [892835 / pairs, 16142 / sample, 1020000 / dialogues]


TWO_CORES = "the machine's 2 CPU cores, a setting of every run"
# (section heading, how the paragraph starts) -> Prose. A paragraph takes the declaration with the
# longest matching start; a paragraph that holds a number must have one.
README_PROSE = {
    ("# dialoguecse_tf", "A TensorFlow 2 / Keras 3 reproduction"): Prose(
        ("papers/dialoguecse_emnlp2021.txt",),  # the citation's year
        fixed={"2": "TensorFlow 2, the framework's major version", "3": "Keras 3, its major version"}),
    ("## Quick start", "Both create `.venv`"): Prose(
        ("setup.py", "benchmarks/results/scaling.json")),  # python_requires; the environment's "python"
    ("## Quick start", "The demo is the main job"): Prose(("experiments/demo.yaml",)),
    ("## Quick start", "On this machine (2 cores"): Prose(
        ("results/demo/command.txt", "results/demo/stage_seconds.tsv",
         Computed("the total in minutes, the corpus and records stages, the three exports", _demo_seconds)),
        fixed={"2": TWO_CORES}),
    ("## Quick start", "One seed and 100 steps per objective"): Prose(
        ("results/demo/results_table.md", "git:ad42d2b~1:results/demo/results_table.md",
         "git:ad42d2b:results/demo/results_table.md", "experiments/demo.yaml",
         "git:e256c6c:experiments/demo.yaml",  # the former 128-token dialogue reading
         default_of("dialoguecse_tf.evaluation.config", "EvaluationConfig", "dialogue_max_seq_length"))),
    (HEADLINE, "`bash run_scripts/benchmark_all.sh`"): Prose(("results/benchmark/results.md",), fixed={"2": TWO_CORES}),
    (HEADLINE, "**Chinese track**"): Prose(("results/ecd_cpu/mlm_prep_stats.json", "experiments/configs/small_bert.json")),
    (HEADLINE, "**English track**"): Prose(
        # SGD train less the held-out files: the benchmark's records, which dse_sgd_minilm reuses by key.
        ("results/dse_sgd_minilm/contrastive_records_prep_stats.json", "experiments/benchmark.yaml",
         "experiments/common/sgd.yaml", constant("dialoguecse_tf.evaluation.prototypes", "SHOTS"),
         default_of("dialoguecse_tf.evaluation.config", "EvaluationConfig", "dialogue_max_seq_length"),
         "results/SUPERSEDED.md"),  # the changes the table predates (192 tokens then)
        fixed={"64": "HWU64's 64 intents, the dataset's name"}),
    (HEADLINE, "**In words**"): Prose(("results/benchmark/findings.md", "results/benchmark/results.md"),
                                      fixed={"2": TWO_CORES}),
    (HEADLINE, "**Trained longer**"): Prose(("results/benchmark/en_budget/findings.md",)),
    (HEADLINE, "The papers' own numbers"): Prose(
        ("papers/dse_naacl2022.txt", "papers/dial2vec_emnlp2022.md", "papers/dialoguecse_emnlp2021.txt",
         "results/dse_sgd_minilm/pairs_consecutive_prep_stats.json", "experiments/common/sgd.yaml",
         "results/ecd_cpu/mlm_prep_stats.json",
         Computed("each paper's training data over ours (DSE's pairs, dial2vec's SGD dialogues, DialogueCSE's "
                  "ECD dialogues)", _data_ratios))),
    ("## Performance and reliability", "Measured on 2 CPU cores"): Prose(fixed={"2": TWO_CORES}),
    ("## Performance and reliability", "- **Every objective against PyTorch**"): Prose(
        ("benchmarks/results/objective_steps.json",), fixed={"1.5": "the issue's speed goal, a target"}),
    ("## Performance and reliability", "- **bfloat16**"): Prose(
        ("benchmarks/results/flops_bfloat16.json", "benchmarks/results/encode_throughput_bfloat16.json",
         "benchmarks/results/step_profile_bfloat16.json", "benchmarks/results/objective_steps_bfloat16.json",
         "results/bfloat16_quality/table.md", "results/bfloat16_quality/findings.md",
         "results/bfloat16_quality/parts/float32-dse+simcse+dse_bf16+simcse_bf16/stage_seconds.tsv",
         "results/bfloat16_quality/parts/bfloat16-dse+simcse+dse_bf16+simcse_bf16/stage_seconds.tsv",
         "results/bfloat16_quality/parts/float32-dialoguecse+dial2vec+dialoguecse_bf16+dial2vec_bf16/stage_seconds.tsv",
         "results/bfloat16_quality/parts/bfloat16-dialoguecse+dial2vec+dialoguecse_bf16+dial2vec_bf16/stage_seconds.tsv",
         "experiments/benchmark.yaml"),
        fixed={"2": TWO_CORES, "1.5": "the issue's speed goal, a target"}),
    ("## Performance and reliability", "- **The papers' model shape**"): Prose(
        ("benchmarks/results/paper_shape.json", Computed("its presets and largest peak RSS in GiB", _paper_shape),
         Computed("paper_dial2vec's candidates per dialogue (num_negatives + 1)", _dial2vec_candidates))),
    ("## Performance and reliability", "- **Record building on Apache Beam**"): Prose((RECORD_BUILDING,)),
    ("## Performance and reliability", "- [benchmarks/README.md]"): Prose(fixed={"2": TWO_CORES}),
}


# ---- Reading the docs ------------------------------------------------------------------------------

def _cells(line):
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def read_tables(doc) -> list:
    """Every Markdown table of `doc` (a header line followed by a separator line)."""
    lines = (REPO_ROOT / doc).read_text(encoding="utf-8").splitlines()
    tables, heading, counts, index, fenced, generated = [], "", {}, 0, False, False
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("<!-- table: "):
            generated = True
        elif not fenced and line == "<!-- /table -->":
            generated = False
        elif not fenced and re.match(r"^#{1,6} ", line):
            heading = line.strip()
        if (not fenced and line.startswith("|") and index + 1 < len(lines)
                and re.match(r"^\|\s*:?-", lines[index + 1])):
            end = index + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            ordinal = counts.get(heading, 0)
            counts[heading] = ordinal + 1
            tables.append(Table(doc, heading, ordinal, index + 1, _cells(line),
                                tuple(_cells(row) for row in lines[index + 2:end]), generated))
            index = end
            continue
        index += 1
    return tables


def read_paragraphs(doc) -> list:
    """(heading, first line, text) of each prose paragraph of `doc`: outside code blocks, tables and
    table markers; a list item is a paragraph of its own."""
    paragraphs, heading, current, fenced = [], "", None, False
    for number, line in enumerate((REPO_ROOT / doc).read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        blank = fenced or line.startswith("```") or not line.strip() or line.startswith(("|", "<!--"))
        is_heading = not fenced and re.match(r"^#{1,6} ", line)
        if current and (blank or is_heading or re.match(r"^(- |\* |\d+\. )", line)):
            paragraphs.append((heading, current[0], " ".join(current[1])))
            current = None
        if is_heading:
            heading = line.strip()
        elif not blank:
            current = current or (number, [])
            current[1].append(line.strip())
    if current:
        paragraphs.append((heading, current[0], " ".join(current[1])))
    return paragraphs


def _numbers(text, markdown=True) -> list:
    """The numbers printed in `text`, in order; in Markdown, link targets and bold marks left out."""
    if markdown:
        text = re.sub(r"\]\([^)]*\)", "]", text).replace("**", "")
    return NUMBER.findall(text)


def _value(token):
    """A printed number's value; a version (two dots or more: 2.20.1, 127.0.0.1) stays text."""
    return token if token.count(".") > 1 else float(token.replace(",", ""))


def _printed_as(number, text, tie="either") -> bool:
    """Whether `number` prints as `text` at the text's precision: 0.891 stands for [0.8905, 0.8915],
    1,123 for [1122.5, 1123.5], 2.4e-7 for [2.35e-7, 2.45e-7]; a version must be the same text. A
    value halfway between two printed numbers prints as either (prose), or with tie="python" as
    Python's format rounds it (tables, which the benchmark scripts print)."""
    if isinstance(number, str) or text.count(".") > 1:
        return number == text
    mantissa, _, exponent = text.replace(",", "").lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    unit = 10.0 ** (int(exponent or 0) - decimals)
    off = abs(number - float(text.replace(",", "")))
    if tie == "python" and not exponent and abs(off - unit / 2) <= unit * 1e-9:
        return f"{number:.{decimals}f}" == mantissa
    return off <= unit / 2 * (1 + 1e-9)


# ---- Specs to numbers ------------------------------------------------------------------------------

def _resolve(data, path):
    value = data
    for part in path.split("/"):
        if isinstance(value, list) and "=" in part:
            wanted = dict(pair.split("=", 1) for pair in part.split(","))
            matches = [item for item in value
                       if isinstance(item, dict) and all(str(item.get(k)) == v for k, v in wanted.items())]
            if len(matches) != 1:
                raise LookupError(f"{len(matches)} items match {part!r} in {path!r}")
            value = matches[0]
        elif isinstance(value, list):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise LookupError(f"no field {part!r} in {path!r}")
    return value


class _Getter:
    """Resolves paths for one row: `{}` (or `{0}`, `{1}`) is the row's key; "alias:" picks a file."""

    def __init__(self, data: dict, key):
        self.data, self.key = data, key

    def __call__(self, path):
        path = path.format(*self.key) if isinstance(self.key, tuple) else path.format(self.key)
        alias, colon, rest = path.partition(":")
        if colon and alias in self.data:
            return _resolve(self.data[alias], rest)
        if len(self.data) != 1:
            raise LookupError(f"{path!r} names none of the files {sorted(self.data)}")
        return _resolve(next(iter(self.data.values())), path)


def _as_numbers(value) -> list:
    if isinstance(value, bool) or value is None:
        raise LookupError(f"{value!r} is no number")
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, str):
        return [_value(token) for token in _numbers(value, markdown=False)]
    if isinstance(value, (list, tuple)):
        return [number for item in value for number in _as_numbers(item)]
    raise LookupError(f"{type(value).__name__} is no number")


def _expected(spec, get) -> list:
    """The numbers `spec` says a cell prints, in order (NOT_MEASURED for one not compared)."""
    if spec is None:
        return []
    if isinstance(spec, tuple):
        return [number for item in spec for number in _expected(item, get)]
    if isinstance(spec, str):
        return _as_numbers(get(spec))
    if isinstance(spec, Fixed):
        return [spec.value]
    if isinstance(spec, NotMeasured):
        return [NOT_MEASURED] * spec.count
    if isinstance(spec, Stated):
        text = (REPO_ROOT / spec.path).read_text(encoding="utf-8")
        missing = [literal for literal in spec.literals if literal not in text]
        if missing:
            raise LookupError(f"{missing[0]!r} is not in {spec.path}")
        numbers = [_value(token) for literal in spec.literals for token in _numbers(literal, markdown=False)]
        return _as_numbers(spec.value(numbers)) if spec.value else numbers
    if isinstance(spec, Known):
        values = _expected(spec.spec, get)
        if len(values) == 1 and _printed_as(values[0], spec.printed):
            raise LookupError(f"{spec.printed} now matches its source: drop the known mismatch ({spec.why})")
        return [spec.printed]
    if isinstance(spec, Computed):
        return _as_numbers(spec.function())
    if isinstance(spec, Field):
        data = _json(spec.path)
        return _as_numbers(spec.field(data) if callable(spec.field) else _resolve(data, spec.field))
    if callable(spec):
        return _as_numbers(spec(get))
    raise TypeError(f"bad spec {spec!r}")


def _shown(expected) -> list:
    return ["not measured" if v is NOT_MEASURED else v if isinstance(v, str) else float(f"{v:.6g}") for v in expected]


_UNDECLARED = object()


def _mapped_cells(table, source):
    """(problems, {(row index, column index): expected numbers}) of a measurements or tests table."""
    where = f"{table.doc}:{table.line}"
    if source.kind == "tests":
        fields = Fields(rows={label: label for label in source.stated}, columns={},
                        cells={(label, header): spec for label, cells in source.stated.items()
                               for header, spec in cells.items()})
        data = {}
    else:
        fields = source.fields
        files = source.files if isinstance(source.files, dict) else {path.rsplit("/", 1)[-1].removesuffix(".json"): path
                                                                    for path in source.files}
        data = {alias: _json(path) for alias, path in files.items()}
    problems, expectations = [], {}
    if isinstance(fields.rows, dict):
        labels = {row[0] for row in table.rows}
        problems += [f"{where}: declared row {label!r} is not in the table" for label in fields.rows if label not in labels]
    for r, row in enumerate(table.rows):
        label = row[0]
        if len(row) != len(table.header):
            problems.append(f"{where}: row {label!r} has {len(row)} cells for {len(table.header)} columns")
        try:
            key = fields.rows[label] if isinstance(fields.rows, dict) else fields.rows(row)
        except (KeyError, IndexError, ValueError):
            problems.append(f"{where}: row {label!r} is no declared row")
            continue
        if key is None:
            problems += [f"{where}: row {label!r} is declared to hold no number" for cell in row if _numbers(cell)][:1]
            continue
        get = _Getter(data, key)
        for c, (header, cell) in enumerate(zip(table.header, row)):
            numbers = _numbers(cell)
            spec = fields.cells.get((label, header), fields.cells.get(
                (key, header), fields.columns.get(header, fields.columns.get(c, _UNDECLARED))))
            at = f"{where}: row {label!r}, column {header or c!r}"
            if spec is _UNDECLARED:
                if numbers and not (c == 0 and isinstance(fields.rows, dict)):
                    problems.append(f"{at}: {numbers} map to no declared field")
                continue
            try:
                expected = _expected(spec, get)
            except (LookupError, IndexError, TypeError, ValueError, AttributeError) as error:
                problems.append(f"{at}: {error}")
                continue
            expectations[r, c] = expected
            if len(numbers) != len(expected) or not all(
                    value is NOT_MEASURED or _printed_as(value, text, tie="python") for text, value in zip(numbers, expected)):
                problems.append(f"{at}: prints {numbers}, its source {_shown(expected)}")
    return problems, expectations


def _decimals(cells) -> list:
    return [match for cell in cells for match in DECIMAL.findall(cell.replace("**", ""))]


def _is_subsequence(part, whole) -> bool:
    remaining = iter(whole)
    return all(any(item == candidate for candidate in remaining) for item in part)


def _is_submultiset(part, whole) -> bool:
    remaining = list(whole)
    for item in part:
        if item not in remaining:
            return False
        remaining.remove(item)
    return True


def _kept_cells(table, source, row):
    skipped = {i for i, header in enumerate(table.header) if header in source.skip_columns}
    return [cell for i, cell in enumerate(row) if i >= 1 and i not in skipped]


def _source_rows(source) -> dict:
    rows = {}
    for path in source.files:
        for table in read_tables(path):
            for row in table.rows:
                rows[row[0]] = row[1:]
    return rows


def _check(table, source) -> list:
    """Problems of `table` against `source`, one line each."""
    where = f"{table.doc}:{table.line}"
    problems = []
    if source.kind == "text":
        problems += [f"{where}: row {row[0]!r} holds decimal numbers but the table is declared text-only"
                     for row in table.rows if _decimals(row[1:])]
    elif source.kind == "results":
        rows = _source_rows(source)
        for row in table.rows:
            label = row[0]
            if label in source.unsourced_rows:
                continue
            wanted = label if label in rows else source.labels.get(label, source.template.format(label))
            if wanted not in rows:
                problems.append(f"{where}: row {label!r} is not a row of {', '.join(source.files)}")
                continue
            numbers = _decimals(_kept_cells(table, source, row))
            found = (_is_submultiset(numbers, _decimals(rows[wanted])) if source.any_order
                     else _is_subsequence(numbers, _decimals(rows[wanted])))
            if not found:
                problems.append(f"{where}: row {label!r} {numbers} is not in {source.files[0]}'s row "
                                f"{wanted!r} {_decimals(rows[wanted])}")
    elif source.kind == "measurements" and isinstance(source.fields, Fields):
        problems += _mapped_cells(table, source)[0]
    elif source.kind == "paper":
        for row in table.rows:
            name = source.paper if isinstance(source.paper, str) else next(
                (f for prefix, f in source.paper.items() if row[0].startswith(prefix)), None)
            if name is None:
                problems.append(f"{where}: row {row[0]!r} names no paper")
                continue
            text = (PAPERS / name).read_text(encoding="utf-8")
            problems += [f"{where}: row {row[0]!r}: {number} is not in {name}" for number in _decimals(row[1:])
                         if not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", text)]
    elif source.kind == "tests" and source.why:
        problems += _mapped_cells(table, source)[0]
    else:
        problems.append(f"{where}: bad declaration {source}")
    return problems


# ---- README prose ----------------------------------------------------------------------------------

class _Unavailable(Exception):
    """A declared source that is not on this machine (the papers folder, a commit of a shallow clone)."""


def _source_numbers(source) -> list:
    """The numbers a prose source holds: its JSON numbers and the numbers written in its text."""
    if isinstance(source, Computed):
        return _as_numbers(source.function())
    if source.startswith("papers/"):
        path = PAPERS / source.removeprefix("papers/")
        if not path.is_file():
            raise _Unavailable(f"{path} is missing")
        return [_value(token) for token in _numbers(path.read_text(encoding="utf-8"))]
    if source.startswith("git:"):
        import subprocess
        completed = subprocess.run(["git", "show", source.removeprefix("git:")], cwd=REPO_ROOT, capture_output=True,
                                   text=True, check=False)
        if completed.returncode:
            raise _Unavailable(f"git show {source.removeprefix('git:')} failed: {completed.stderr.strip()}")
        return [_value(token) for token in _numbers(completed.stdout)]
    text = (REPO_ROOT / source).read_text(encoding="utf-8")
    if source.endswith(".json"):
        def leaves(value):
            if isinstance(value, dict):
                return [n for item in value.values() for n in leaves(item)]
            if isinstance(value, list):
                return [n for item in value for n in leaves(item)]
            return [] if value is None or isinstance(value, bool) else _as_numbers(value)
        return leaves(json.loads(text))
    return [_value(token) for token in _numbers(text)]


def _found(token, numbers) -> bool:
    """Whether a printed number is one of a source's: at its precision; an integer under 10 (a count)
    only as that integer; "2.20" as the start of a version 2.20.0."""
    if "." in token and any(isinstance(n, str) and (n + ".").startswith(token + ".") for n in numbers):
        return True
    value = _value(token)
    if isinstance(value, float) and re.fullmatch(r"\d", token):
        return any(not isinstance(n, str) and n == value for n in numbers)
    return any(_printed_as(n, token) for n in numbers if not isinstance(n, str) or token.count(".") > 1)


def _declared_paragraphs() -> tuple:
    """({declaration key: its paragraphs}, [undeclared paragraphs that hold a number])."""
    matched, undeclared = {key: [] for key in README_PROSE}, []
    for heading, line, text in read_paragraphs("README.md"):
        keys = [key for key in README_PROSE if key[0] == heading and text.startswith(key[1])]
        if keys:
            matched[max(keys, key=lambda key: len(key[1]))].append((line, text))
        elif _numbers(text):
            undeclared.append(f"README.md:{line} ({heading!r}, {text[:50]!r}...): {_numbers(text)}")
    return matched, undeclared


def _prose_problems(prose, paragraphs) -> tuple:
    """(numbers found in no source, sources not on this machine) of the paragraphs of one declaration."""
    numbers, unavailable = [], []
    for source in prose.sources:
        try:
            numbers += _source_numbers(source)
        except _Unavailable as error:
            unavailable.append(str(error))
    missing = [f"README.md:{line}: {token}" for line, text in paragraphs for token in _numbers(text)
               if token not in prose.fixed and token not in prose.known and not _found(token, numbers)]
    return missing, unavailable


# ---- The tests -------------------------------------------------------------------------------------

def _all_tables():
    return [table for doc in DOCS for table in read_tables(doc)]


def test_every_table_is_declared_and_every_declaration_is_a_table():
    found = {(t.doc, t.heading, t.ordinal): t for t in _all_tables() if not t.generated}
    undeclared = [f"{t.doc}:{t.line} ({t.heading!r}, table {t.ordinal})" for key, t in found.items()
                  if key not in DECLARED]
    assert not undeclared, f"tables without a declared source: {undeclared}"
    assert not set(DECLARED) - set(found), f"declared tables not found: {sorted(set(DECLARED) - set(found))}"


@pytest.mark.parametrize("key", sorted(DECLARED), ids=lambda key: f"{key[0]}:{key[1][:40]}:{key[2]}")
def test_table_numbers_are_in_their_source(key):
    tables = {(t.doc, t.heading, t.ordinal): t for t in _all_tables()}
    if key not in tables:
        pytest.fail(f"declared table {key} not found")
    if DECLARED[key].kind == "paper" and not PAPERS.is_dir():
        pytest.skip(f"the papers folder {PAPERS} is missing: this table's transcribed paper numbers are not checked")
    problems = _check(tables[key], DECLARED[key])
    assert not problems, "\n".join(problems)


def test_the_english_study_reads_each_ablation_against_the_main_means_by_the_rule():
    """The study's "against the mean" cells (skipped by the table check above): each one-seed
    ablation's gap to the main table's 3-seed row and the rule's verdict on it."""
    table = next(t for t in read_tables("docs/english_track.md") if t.heading.startswith("### Why DialogueCSE"))
    study = {row["model"]: row for row in json.loads((REPO_ROOT / "results/sgd_minilm/study/table.json").read_text())["rows"]}
    main = {row["model"].split(" (")[0]: row for row in
            json.loads((REPO_ROOT / "results/sgd_minilm/table.json").read_text())["rows"]}
    columns = {name: index for index, name in enumerate(table.header)}
    for cells in table.rows:
        label = cells[0]
        model = "SiameseBERT_M / no MLM" if label == "SiameseBERT_M, no MLM" else f"DialogueCSE_I2 / {label.split(' (')[0]}"
        reference = main["SiameseBERT_M" if model.startswith("SiameseBERT_M") else "DialogueCSE_I2"]
        for metric, column in (("map", "MAP against the mean"), ("mrr", "MRR against the mean")):
            value = study[model]["metrics"]["SGD-dev"][metric]
            mean, std = reference["metrics"]["SGD-dev"][metric], reference["spread"]["SGD-dev"][metric]
            verdict = ("level" if level(value, 0.0, mean, std) else "ahead" if value > mean else "behind")
            assert cells[columns[column]] == f"{value - mean:+.2f}, {verdict}", (label, column)


def _shifted(token, step):
    """`token` moved by `step` units of its last digit (1,123 -> 1,124; 0.891 -> 0.890; 2.4e-7 ->
    2.5e-7; 127.0.0.1 -> 127.0.0.2); None where that would turn it negative."""
    if token.count(".") > 1:
        head, _, last = token.rpartition(".")
        return f"{head}.{int(last) + step}" if int(last) + step >= 0 else None
    mantissa, e, exponent = token.partition("e")
    decimals = len(mantissa.partition(".")[2])
    units = round(float(mantissa.replace(",", "")) * 10 ** decimals) + step
    if units < 0 <= float(mantissa.replace(",", "")):
        return None
    text = f"{units / 10 ** decimals:{',' if ',' in mantissa else ''}.{decimals}f}"
    return text + e + exponent


def test_a_changed_last_digit_fails_every_mapped_cell():
    """Each number of each measurements and tests table, moved one unit of its last digit either way,
    must be refused, but for the numbers the declaration names as not measured."""
    tables = {(t.doc, t.heading, t.ordinal): t for t in _all_tables()}
    slipped, changed, not_measured = [], 0, 0
    for key, source in DECLARED.items():
        if source.kind not in ("measurements", "tests"):
            continue
        table = tables[key]
        problems, expectations = _mapped_cells(table, source)
        assert not problems, problems
        for r, row in enumerate(table.rows):
            for c, cell in enumerate(row):
                for i, match in enumerate(NUMBER.finditer(cell)):
                    expected = expectations.get((r, c), ())
                    if i < len(expected) and expected[i] is NOT_MEASURED:
                        not_measured += 1
                        continue
                    for step in (1, -1):
                        token = _shifted(match.group(), step)
                        if token is None:
                            continue
                        changed += 1
                        cells = list(row)
                        cells[c] = cell[:match.start()] + token + cell[match.end():]
                        rows = table.rows[:r] + (tuple(cells),) + table.rows[r + 1:]
                        if not _check(dataclasses.replace(table, rows=rows), source):
                            slipped.append(f"{table.doc}:{table.line} row {row[0]!r}: {match.group()} -> {token}")
    assert changed > 1000, f"only {changed} numbers changed"
    assert not slipped, f"{len(slipped)} of {changed} changed numbers still pass:\n" + "\n".join(slipped)


def test_every_readme_paragraph_with_a_number_is_declared_and_every_declaration_matches():
    matched, undeclared = _declared_paragraphs()
    assert not undeclared, "README.md paragraphs whose numbers have no declared source:\n" + "\n".join(undeclared)
    unmatched = [key for key, paragraphs in matched.items() if not paragraphs]
    assert not unmatched, f"declarations that match no README.md paragraph: {unmatched}"


@pytest.mark.parametrize("key", sorted(README_PROSE), ids=lambda key: f"{key[0][:24]}:{key[1][:32]}")
def test_readme_prose_numbers_are_in_their_sources(key):
    paragraphs = _declared_paragraphs()[0][key]
    if not paragraphs:
        pytest.fail(f"{key} matches no README.md paragraph")
    missing, unavailable = _prose_problems(README_PROSE[key], paragraphs)
    if missing and unavailable:
        pytest.skip(f"{missing} are not in the sources on this machine, and {unavailable}")
    assert not missing, f"numbers in none of {README_PROSE[key].sources}: {missing}"


def test_the_check_fails_on_a_changed_cell_an_unknown_row_and_a_foreign_number(tmp_path, monkeypatch):
    source_doc = tmp_path / "source.md"
    source_doc.write_text("| Model | A | B |\n|:--|--:|--:|\n| M (3 seeds) | 52.49 ± 0.47 | **71.71** |\n",
                          encoding="utf-8")
    monkeypatch.setattr("test_readme_numbers.REPO_ROOT", tmp_path)
    source = _results("source.md", labels={"M, main": "M (3 seeds)"})
    table = Table("x.md", "# x", 0, 1, ("Model", "A", "B"), (("M, main", "52.49 ± 0.47", "71.71"),))
    assert _check(table, source) == []
    changed = dataclasses.replace(table, rows=(("M, main", "52.49 ± 0.46", "71.71"),))
    assert "is not in" in _check(changed, source)[0]
    unknown = dataclasses.replace(table, rows=(("N", "52.49", "71.71"),))
    assert "is not a row of" in _check(unknown, source)[0]
    assert _check(dataclasses.replace(table, rows=(("N", "1.5"),)), Source("text"))
    assert _printed_as(71.65, "71.65") and not _printed_as(71.65, "71.66") and _printed_as(1122.9, "1,123")

    # A measured cell is its own field's: another field's number (1,123 is also "b") or a changed integer fails.
    (tmp_path / "m.json").write_text(json.dumps({"a": {"s": 825.28, "mib": 1122.9}, "b": {"s": 1123}}), encoding="utf-8")
    measured = Source("measurements", ("m.json",), fields=Fields(rows={"a": "a"}, columns={
        "seconds": "{}/s", "MiB": "{}/mib"}))
    table = Table("x.md", "# x", 0, 1, ("run", "seconds", "MiB"), (("a", "825", "1,123"),))
    assert _check(table, measured) == []
    assert _check(dataclasses.replace(table, rows=(("a", "1,123", "1,123"),)), measured)
    assert _check(dataclasses.replace(table, rows=(("a", "826", "1,123"),)), measured)
    assert any("no declared row" in problem
               for problem in _check(dataclasses.replace(table, rows=(("b", "1,123", "1,123"),)), measured))

    # A tests table's tolerance is the test file's literal: changed in either place, the check fails.
    (tmp_path / "test_x.py").write_text("TOLERANCE = 5e-5\n", encoding="utf-8")
    stated = Source("tests", stated={"x": {"held": Stated("test_x.py", "TOLERANCE = 5e-5")}}, why="a test")
    table = Table("x.md", "# x", 0, 1, ("row", "held"), (("x", "within 5e-5"),))
    assert _check(table, stated) == []
    assert _check(dataclasses.replace(table, rows=(("x", "within 6e-5"),)), stated)
    (tmp_path / "test_x.py").write_text("TOLERANCE = 1e-4\n", encoding="utf-8")
    assert "is not in test_x.py" in _check(table, stated)[0]

    # Prose: a number of a declared source passes; another, or a count matched only by a rounded
    # measurement, does not; a missing paper is reported as unavailable, not as an error.
    prose = Prose(("m.json",), fixed={"2": "two cores"})
    assert _prose_problems(prose, [(1, "took 825 s and 1,123 MiB on 2 cores")]) == ([], [])
    assert _prose_problems(prose, [(1, "took 826 s")])[0] == ["README.md:1: 826"]
    (tmp_path / "n.json").write_text(json.dumps({"dialogues_per_s": 4.55}), encoding="utf-8")
    assert _prose_problems(Prose(("n.json",)), [(1, "5 dialogues")])[0] == ["README.md:1: 5"]
    monkeypatch.setattr("test_readme_numbers.PAPERS", tmp_path / "no_papers")
    missing, unavailable = _prose_problems(Prose(("papers/x.txt",)), [(1, "EMNLP 2021")])
    assert missing == ["README.md:1: 2021"] and "is missing" in unavailable[0]
