"""The check of `test_one_step_*.py` (docs/design.md, principle 4): for a
generative model, greedy decoding, beam search (with and without a length
penalty for one model of each kind of state, `PENALTY`) and seeded
sampling give identical ids in Keras (`generate` as a
TensorFlow graph with `max_length` buffers, and XLA-compiled), in the
SavedModel's default graph (growing caches, finished rows leaving the
loop, the prompt prefilled), loaded in a process without seqkeras, and
for one model of each kind of state (`XLA_OPTION`) in the SavedModel's
XLA option too (`jit_compile=True`: fixed buffers written in place);
every export passes the serving audit. A language model's
sampled and greedy `generate_sample` requests carry prompts of different
lengths (right-padded, with `prompt_lengths`)."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

import seqkeras
from seqkeras.export import assert_servable, saved_model
from seqkeras.export import signatures as S
from seqkeras.pretrained import gpt2_language_model
from tests.models.test_contract import build as user_model

M = seqkeras.models
V = 15
MAX_LENGTH = 9
ALPHA = 0.6
SEED = 11
TOP_K = 4
#: each prompt row's length in the padded requests (width 4)
LENGTHS = np.array([4, 2, 3, 1, 4], "int32")
ONE_STEP_SCORES = ("additive", "general")  # Bahdanau's and Luong's
#: the models whose served XLA option (a second SavedModel, compiled with
#: `jit_compile=True`: fixed buffers written in place) is exported and run
#: too: one of each kind of state (attention caches with a window and
#: grouped heads, an encoder-decoder's self and cross caches, a recurrent
#: decoder with attention, a chunked fixed-size state). The XLA option runs
#: the loop that Keras' XLA `generate` runs, checked for every model above;
#: exporting it for every model doubled the one-step tests' time (the
#: hybrid's took 30 s of its slow test: its Keras XLA `generate` is checked)
XLA_OPTION = (
    "decoder_language_model",
    "transformer_seq2seq_pre_ln",
    "seq2seq_additive",
    "mamba2_language_model",
)
#: beam search with a length penalty for these models only: the penalty
#: rescores finished beams in the decoding module, the same code for every
#: kind of state (the beam's reordering of each state: `generate_beam`,
#: checked for every model)
PENALTY = XLA_OPTION + ("hybrid_language_model",)

BUILDERS = {
    "recurrent_language_model": lambda: M.recurrent_language_model(V, 8, cell="gru", num_layers=2),
    "transformer_language_model": lambda: M.transformer_language_model(
        V, 16, num_layers=2, num_heads=2, hidden_dim=8
    ),
    "gpt2_language_model": lambda: gpt2_language_model(
        dict(
            vocab_size=V,
            hidden_dim=8,
            num_layers=2,
            num_heads=2,
            intermediate_dim=16,
            max_length=16,
        )
    ),
    # rotary, grouped-query, sliding-window (second block) attention with
    # query/key/value biases and an untied output matrix
    "decoder_language_model": lambda: M.decoder_language_model(
        V,
        8,
        2,
        4,
        16,
        num_key_value_heads=2,
        window=4,
        window_layers=[1],
        attention_bias=True,
        tie_weights=False,
        max_length=16,
    ),
    # the language models that generate with a fixed-size state
    "min_gru_language_model": lambda: M.recurrent_language_model(V, 8, cell="mingru", num_layers=2),
    "mamba_language_model": lambda: M.mamba_language_model(V, 8, 2, state_size=4),
    "mamba2_language_model": lambda: M.mamba_language_model(
        V, 8, 2, version="mamba2", state_size=4, head_dim=4, num_groups=2, chunk_size=2
    ),
    # Griffin: RG-LRU blocks and local attention (window 3)
    "griffin_language_model": lambda: M.griffin_language_model(
        V, 8, 3, num_heads=2, intermediate_dim=16, window=3, max_length=16, tie_weights=False
    ),
    # gated DeltaNet, mLSTM and sLSTM blocks, then Qwen3-Next's gated
    # attention (q/k norms, an output gate, partial rotary positions)
    "hybrid_language_model": lambda: M.hybrid_language_model(
        V,
        8,
        4,
        num_heads=2,
        block_types=("deltanet", "mlstm", "slstm", "attention"),
        intermediate_dim=16,
        block_options={
            "deltanet": {"chunk_size": 4},
            "mlstm": {"chunk_size": 4},
            "attention": {"query_key_norm": 1e-6, "output_gate": True, "rotary_dim": 2},
        },
        max_length=16,
        tie_weights=False,
    ),
    "rwkv7_language_model": lambda: M.rwkv7_language_model(
        V,
        8,
        2,
        intermediate_dim=16,
        head_size=4,
        decay_lora=4,
        aaa_lora=4,
        mv_lora=4,
        gate_lora=4,
        chunk_size=4,
    ),
    "recurrent_seq2seq": lambda: M.recurrent_seq2seq(V, V, units=8, embedding_dim=8),
    **{
        f"seq2seq_{score}": (
            lambda score=score: M.recurrent_seq2seq(
                V,
                V,
                units=8,
                embedding_dim=8,
                attention=score,
                encoder_units=4,
                style="luong" if score in ("dot", "general") else "bahdanau",
            )
        )
        # one score per attention style: the decoding step is the same for
        # every score (each score's own maths, masks, dtypes and exports
        # are tests/layers/test_attention.py's and test_attention_decoder's)
        for score in ONE_STEP_SCORES
    },
    "transformer_seq2seq_post_ln": lambda: M.transformer_seq2seq(
        V, V, 16, num_layers=2, num_heads=2, hidden_dim=8
    ),
    "transformer_seq2seq_pre_ln": lambda: M.transformer_seq2seq(
        V, V, 16, num_layers=2, num_heads=2, hidden_dim=8, norm_first=True, positional="learned"
    ),
    "conditioned_decoder": lambda: M.conditioned_decoder(5, V, units=8, embedding_dim=8),
    "user_subclass": user_model,
}


class GenerateBeamPenalty(S.GenerateBeam):
    """`generate_beam_penalty`: beam search with GNMT's length penalty."""

    names = ("generate_beam_penalty",)

    def build(self, model, check=True):
        found = super().build(model, check)
        return S.Functions({"generate_beam_penalty": found["generate_beam"]}, found.resources)


def _model(name, seed, scale):
    model = BUILDERS[name]()
    rng = np.random.default_rng(seed)
    for w in model.weights:  # large matrices: wide margins between candidates
        if len(w.shape) > 1:
            w.assign(rng.normal(0, scale, w.shape).astype("float32"))
    return model


def _inputs(model):
    rng = np.random.default_rng(1)
    name = getattr(model, "conditioning_input", None)
    if name is None:
        return "prompt_ids", rng.integers(3, V, (5, 2)).astype("int32")
    if name == "features":
        return name, rng.normal(size=(5, 5)).astype("float32")
    ids = rng.integers(3, V, (5, 6)).astype("int32")
    ids[1, 3:] = 0  # padding
    return name, ids


STRATEGIES = (
    "generate",
    "generate_beam",
    "generate_beam_penalty",
    "generate_sample",
    "generate_padded",
)


def _padded(model):
    """The sampled and padded requests' input: a language model's
    right-padded prompts of `LENGTHS` (width 4); a conditioned model's
    own input."""
    if getattr(model, "conditioning_input", None) is not None:
        return _inputs(model)[1]
    ids = np.random.default_rng(3).integers(3, V, (5, 4)).astype("int32")
    for row, n in zip(ids, LENGTHS):
        row[n:] = 0
    return ids


def _keras(model, x, eos, strategies=STRATEGIES, jit_compile=False):
    conditioned = getattr(model, "conditioning_input", None) is not None
    # jit_compile=False: a TensorFlow graph with max_length buffers, beside
    # the served graph (growing caches) and the XLA option (compiled)
    common = dict(max_length=MAX_LENGTH, eos_id=eos, jit_compile=jit_compile)
    padded = {}
    if not conditioned:
        padded = dict(prompt_lengths=LENGTHS)
    options = {
        "generate": {},
        "generate_beam": dict(strategy="beam", beam_width=3),
        "generate_beam_penalty": dict(strategy="beam", beam_width=3, length_penalty_alpha=ALPHA),
        "generate_sample": dict(strategy="sample", seed=SEED, top_k=TOP_K, **padded),
        "generate_padded": dict(padded),
    }
    found = {}
    for name in strategies:
        if conditioned and name == "generate_padded":  # prompts: a language model's
            continue
        given = _padded(model) if name in ("generate_sample", "generate_padded") else x
        args = dict(inputs=given) if conditioned else dict(prompt=given)
        ids = M.generate(model, **args, **common, **options[name])
        found[name] = np.asarray(ids[0] if "beam" in name else ids)
    return found


def _feeds(model, input_name, x):
    """`{signature: {input: (values, dtype)}}` for the fresh process."""
    padded = _padded(model)
    sampled = {input_name: (padded.tolist(), str(padded.dtype)), "seed": (SEED, "int32")}
    if getattr(model, "conditioning_input", None) is None:
        sampled["prompt_lengths"] = (LENGTHS.tolist(), "int32")
    plain = {input_name: (x.tolist(), str(x.dtype))}
    feeds = {
        "generate": plain,
        "generate_beam": plain,
        "generate_beam_penalty": plain,
        "generate_sample": sampled,
    }
    if getattr(model, "conditioning_input", None) is None:  # prompts of different lengths
        feeds["generate_padded"] = sampled
    return feeds


def _ending_token(ids, start):
    """A token of the generated part of `ids` that first appears at two or
    more different steps across rows (or in some rows only)."""
    for token in np.unique(ids[:, start:]):
        firsts = {list(row[start:]).index(token) if token in row[start:] else None for row in ids}
        if len(firsts) >= 2:
            return int(token)
    return None


_FRESH = r"""
import json, sys
sys.modules["seqkeras"] = None  # as on a model server
import numpy as np, tensorflow as tf
out = {}
for key, path, feeds in json.load(sys.stdin):
    signatures = tf.saved_model.load(path).signatures
    for signature, feed in feeds.items():
        given = {k: tf.constant(np.asarray(v, dtype)) for k, (v, dtype) in feed.items()}
        out[f"{key} {signature}"] = signatures[signature](**given)["ids"].numpy().tolist()
print(json.dumps(out))
"""


def check(names, tmp_path):
    """The equality check over the builders `names` (keys of `BUILDERS`)."""
    expected, jobs = {}, []
    for name in names:
        # EOS: a token the model emits, at different steps in different
        # rows (random weights of the first seed that has one)
        for seed, scale in [(s, c) for c in (0.5, 0.3, 0.15) for s in range(3)]:
            model = _model(name, seed, scale)
            input_name, x = _inputs(model)
            start = x.shape[1] if input_name == "prompt_ids" else 1
            # the search decodes eagerly: a trace per candidate model cost
            # about a quarter of these tests' time
            eagerly = tf.config.functions_run_eagerly()
            tf.config.run_functions_eagerly(True)
            try:
                eos = _ending_token(_keras(model, x, None, ["generate"])["generate"], start)
            finally:
                tf.config.run_functions_eagerly(eagerly)
            if eos is not None:
                break
        assert eos is not None, name
        strategies = [s for s in STRATEGIES if name in PENALTY or "penalty" not in s]
        expected[name] = _keras(model, x, eos, strategies)
        # Keras under XLA: the same ids (the prompt prefilled at its static
        # width; prompts of different lengths step by step), beam search too
        # (an encoder-decoder's XLA beam search is the served XLA option's,
        # checked below for those in XLA_OPTION: its Keras twin is left out
        # for the suite's time)
        under_xla = ("generate", "generate_sample")
        if input_name == "prompt_ids":
            under_xla += ("generate_beam",)
        compiled = _keras(model, x, eos, under_xla, True)
        for strategy, ids in compiled.items():
            np.testing.assert_array_equal(ids, expected[name][strategy], err_msg=f"{name} xla")
        signatures = [
            S.Generate(MAX_LENGTH, eos_id=eos),
            S.GenerateBeam(MAX_LENGTH, beam_width=3, eos_id=eos),
            S.GenerateSample(MAX_LENGTH, eos_id=eos, top_k=TOP_K),
        ]
        feeds = _feeds(model, input_name, x)
        if name in PENALTY:
            signatures.append(
                GenerateBeamPenalty(
                    MAX_LENGTH, beam_width=3, length_penalty_alpha=ALPHA, eos_id=eos
                )
            )
        else:
            del feeds["generate_beam_penalty"]
        if "generate_padded" in feeds:
            signatures.append(
                S.GenerateSample(MAX_LENGTH, eos_id=eos, temperature=0, name="generate_padded")
            )
        for xla in (False, True) if name in XLA_OPTION else (False,):
            path = saved_model(
                model, tmp_path / name / str(int(xla) + 1), signatures, jit_compile=xla
            )
            audit = assert_servable(path, xla_jit=xla)
            assert xla or not any(op.startswith("Xla") for op in audit["ops"]), name
            jobs.append((f"{name} {'xla' if xla else 'graph'}", str(path), feeds))
    result = subprocess.run(
        [sys.executable, "-c", _FRESH],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    wrong = []
    for key, ids in served.items():
        name, runtime, signature = key.split()
        if not np.array_equal(np.asarray(ids), expected[name][signature]):
            wrong.append(
                f"{name} {runtime} {signature}: {ids} != {expected[name][signature].tolist()}"
            )
    assert not wrong, "\n".join(wrong)
    assert len(served) == sum(len(job[2]) for job in jobs)
    assert len(served) >= len(names) * 3 + 5 * len(set(names) & set(XLA_OPTION))
