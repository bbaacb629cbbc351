"""Error inputs of the layers the catalogue leaves out, of
`seqkeras.decoding.length_penalty`, and of `seqkeras.metrics` and
`seqkeras.plots` (NumPy and matplotlib helpers: each bad argument fails
before a figure is drawn or a file written)."""

import os
import tempfile

import numpy as np

from seqkeras import decoding
from seqkeras import layers as L
from seqkeras import metrics
from seqkeras import plots
from tests.error_inputs import entry
from tests.error_inputs import opt_out

F = np.float32
RNG = np.random.default_rng(0)
X3 = RNG.normal(size=(2, 5, 4)).astype(F)  # (batch, time, features)
X4 = RNG.normal(size=(1, 3, 2, 4)).astype(F)  # (batch, time, heads, dim)
IDS = np.array([[4, 5, 6, 0], [7, 8, 0, 0]], "int32")
TEXT = np.array([["a", "b"]])
NEVER = os.path.join(tempfile.gettempdir(), "seqkeras-never-written.png")


def built(layer, *args, **kwargs):
    layer(*args, **kwargs)
    return layer


def at(name):
    return f"seqkeras.{name}"


# ---- decoding.length_penalty ---------------------------------------------------
LP = at("decoding.length_penalty")
entry(LP, "alpha", lambda: decoding.length_penalty(3, -0.5), graph=True, xla=True)
entry(LP, "alpha", lambda: decoding.length_penalty(3, float("nan")), graph=True, xla=True)
entry(LP, "alpha", lambda: decoding.length_penalty(3, "0.6"), graph=True, xla=True)
entry(LP, "length", lambda: decoding.length_penalty(np.array(["3"]), 0.6), graph=True, xla=True)
entry(LP, "length", lambda: decoding.length_penalty(np.array([2, -7]), 0.6))

# ---- layers ------------------------------------------------------------------
BE = at("layers.BertEmbedding")
entry(BE, "vocab_size", lambda: L.BertEmbedding(0, 8))
entry(BE, "layer_norm_epsilon", lambda: L.BertEmbedding(20, 8, layer_norm_epsilon=0.0))
entry(BE, "token_ids", lambda: L.BertEmbedding(20, 8)(np.array([[3, 25]])))
entry(BE, "token_ids", lambda: L.BertEmbedding(20, 8)(TEXT), graph=True, xla=True)
entry(BE, "token_ids", lambda: L.BertEmbedding(20, 8, max_length=3)(IDS), graph=True, xla=True)
entry(BE, "segment_ids", lambda: L.BertEmbedding(20, 8)(IDS, segment_ids=np.full((2, 4), 2)))
entry(BE, "segment_ids", lambda: L.BertEmbedding(20, 8)(IDS, segment_ids=np.zeros((2, 3), "int32")))

E3 = RNG.normal(size=(2, 4, 3)).astype(F)  # emissions over 3 tags
TAGS = np.array([[0, 1, 2, 1], [2, 2, 0, 0]])
CRF = at("layers.CRF")
entry(CRF, "num_tags", lambda: L.CRF(0))
entry(CRF, "emissions", lambda: L.CRF(4)(E3), graph=True, xla=True)
entry(CRF, "mask", lambda: L.CRF(3)(E3, mask=np.ones((2, 5), bool)), graph=True, xla=True)
entry(CRF, "tags", lambda: L.CRF(3).loss(E3, TAGS + 1))
entry(CRF, "tags", lambda: L.CRF(3).loss(E3, TAGS[:, :2]), graph=True, xla=True)
entry(CRF, "tags", lambda: L.CRF(3).loss(E3, TAGS.astype(F) + 0.5), graph=True, xla=True)

# ---- the linear recurrences ----------------------------------------------------
for cell in ("MinGRUCell", "MinLSTMCell", "LinearRecurrentCell"):
    cls = getattr(L, cell)
    entry(at(f"layers.{cell}"), "units", lambda cls=cls: cls(0))
    entry(at(f"layers.{cell}"), "units", lambda cls=cls: cls("8"))
    entry(at(f"layers.{cell}"), "candidate", lambda cls=cls: cls(4, candidate="tanh"))
    entry(at(f"layers.{cell}"), "dropout", lambda cls=cls: cls(4, dropout=1.5))
MM = at("layers.MambaMixer")
entry(MM, "state_size", lambda: L.MambaMixer(state_size=0))
entry(MM, "conv_kernel", lambda: L.MambaMixer(conv_kernel="4"))
entry(MM, "time_step_rank", lambda: L.MambaMixer(time_step_rank=0))
entry(MM, "inputs", lambda: L.MambaMixer()(X3[0]))
entry(MM, "padding_mask", lambda: L.MambaMixer()(X3, padding_mask=np.ones((2, 3), bool)))
entry(MM, "cache", lambda: built(L.MambaMixer(), X3)(X3, cache=np.zeros((2, 3)), cache_index=0))
M2 = at("layers.Mamba2Mixer")
entry(M2, "head_dim", lambda: L.Mamba2Mixer(head_dim=0))
entry(M2, "head_dim", lambda: L.Mamba2Mixer(head_dim=3)(X3))
entry(M2, "num_groups", lambda: L.Mamba2Mixer(head_dim=2, num_groups=3)(X3))
entry(M2, "time_step_limit", lambda: L.Mamba2Mixer(time_step_limit=(1.0, 0.5)))
entry(M2, "time_step_limit", lambda: L.Mamba2Mixer(time_step_limit=0.5))
entry(M2, "chunk_size", lambda: L.Mamba2Mixer(chunk_size=0))
MBK = at("layers.MambaBlock")
entry(MBK, "version", lambda: L.MambaBlock("mamba3"))
entry(MBK, "norm_epsilon", lambda: L.MambaBlock(norm_epsilon=0.0))
RG = at("layers.RGLRU")
entry(RG, "num_heads", lambda: L.RGLRU(num_heads=0))
entry(RG, "c", lambda: L.RGLRU(c=-1.0))
entry(RG, "num_heads", lambda: L.RGLRU(num_heads=3)(X3))
entry(RG, "inputs", lambda: L.RGLRU()(X3[0]))
GT = at("layers.GriffinTemporalBlock")
entry(GT, "conv_kernel", lambda: L.GriffinTemporalBlock(conv_kernel=0))
entry(GT, "activation", lambda: L.GriffinTemporalBlock(activation="tanh"))
entry(GT, "width", lambda: L.GriffinTemporalBlock(width=-2))
GBK = at("layers.GriffinBlock")
entry(GBK, "kind", lambda: L.GriffinBlock("mlp"))
entry(GBK, "rotary_fraction", lambda: L.GriffinBlock("attention", rotary_fraction=2.0))
entry(GBK, "rotary_fraction", lambda: L.GriffinBlock("attention", rotary_fraction="half"))
entry(GBK, "window", lambda: L.GriffinBlock("attention", window=0))
entry(GBK, "max_length", lambda: built(L.GriffinBlock("attention", num_heads=2), X3).init_cache(1))
entry(GBK, "init_cache", lambda: L.GriffinBlock().init_cache(1))
GDN = at("layers.GatedDeltaNet")
entry(GDN, "num_key_heads", lambda: L.GatedDeltaNet(0, 4))
entry(GDN, "num_value_heads", lambda: L.GatedDeltaNet(2, 4, num_value_heads=3))
entry(GDN, "decay", lambda: L.GatedDeltaNet(2, 4, decay="sometimes"))
entry(GDN, "delta_rule", lambda: L.GatedDeltaNet(2, 4, delta_rule="yes"))
entry(GDN, "chunk_size", lambda: L.GatedDeltaNet(2, 4, chunk_size=0))
entry(GDN, "cache", lambda: built(L.GatedDeltaNet(2, 4), X3)(X3, cache=np.zeros(2), cache_index=0))
entry(GDN, "init_cache", lambda: L.GatedDeltaNet(2, 4).init_cache(1))
ML = at("layers.MLSTMLayer")
entry(ML, "num_heads", lambda: L.MLSTMLayer(0))
entry(ML, "qk_dim_factor", lambda: L.MLSTMLayer(2, qk_dim_factor=0.0))
entry(ML, "gate_soft_cap", lambda: L.MLSTMLayer(2, gate_soft_cap=-1.0))
entry(ML, "num_heads", lambda: L.MLSTMLayer(3)(X3))
entry(ML, "cache", lambda: built(L.MLSTMLayer(2), X3)(X3, cache=L.MLSTMLayer(2), cache_index=0))


def _cache_without_index():
    layer = built(L.MLSTMLayer(2), X3)
    return layer(X3, cache=layer.init_cache(2))


entry(ML, "cache_index", _cache_without_index)
SL = at("layers.SLSTMLayer")
entry(SL, "num_heads", lambda: L.SLSTMLayer(0))
entry(SL, "conv_kernel", lambda: L.SLSTMLayer(2, conv_kernel=-1))
entry(SL, "num_heads", lambda: L.SLSTMLayer(3)(X3))
entry(SL, "init_cache", lambda: L.SLSTMLayer(2).init_cache(1))
RTM = at("layers.RWKV7TimeMixing")
entry(RTM, "head_size", lambda: L.RWKV7TimeMixing(head_size=0))
entry(RTM, "head_size", lambda: L.RWKV7TimeMixing(head_size=3)(X3))
entry(RTM, "value_residual", lambda: L.RWKV7TimeMixing(head_size=2, value_residual="no"))
entry(RTM, "v_first", lambda: L.RWKV7TimeMixing(head_size=2)(X3))
entry(RTM, "init_cache", lambda: L.RWKV7TimeMixing(head_size=2).init_cache(1))
RCM = at("layers.RWKV7ChannelMixing")
entry(RCM, "intermediate_dim", lambda: L.RWKV7ChannelMixing(0))
entry(RCM, "inputs", lambda: L.RWKV7ChannelMixing(4)(X3[0]))
RB = at("layers.RWKV7Blocks")
entry(RB, "num_layers", lambda: L.RWKV7Blocks(0, 8))
entry(RB, "intermediate_dim", lambda: L.RWKV7Blocks(1, -8))
entry(RB, "cache_index", lambda: L.RWKV7Blocks(1, 8, head_size=2)(X3, cache_index=0))
SC = at("layers.ShortConvolution")
entry(SC, "conv_kernel", lambda: L.ShortConvolution(0))
entry(SC, "use_bias", lambda: L.ShortConvolution(3, use_bias="no"))
entry(SC, "inputs", lambda: L.ShortConvolution(3)(X3[0]))
entry(SC, "init_cache", lambda: L.ShortConvolution(3).init_cache(1))
MXB = at("layers.MixerBlock")
entry(MXB, "kind", lambda: L.MixerBlock("lstm"))
entry(MXB, "norm", lambda: L.MixerBlock("slstm", norm="batch", num_heads=2))
entry(MXB, "intermediate_dim", lambda: L.MixerBlock("slstm", intermediate_dim=-1, num_heads=2))
entry(at("layers.Scale"), "factor", lambda: L.Scale("2"))
entry(at("layers.SoftCap"), "cap", lambda: L.SoftCap(0.0))
entry(at("layers.SoftCap"), "cap", lambda: L.SoftCap(float("nan")))

CHARS = np.array([[[5, 6, 7], [8, 0, 0]]])
CE = at("layers.CharacterEncoder")
entry(CE, "kernel_size", lambda: L.CharacterEncoder(40, kernel_size=2))
entry(CE, "activation", lambda: L.CharacterEncoder(40, activation="sigmoid"))
entry(CE, "inputs", lambda: L.CharacterEncoder(40)(CHARS[0]), graph=True, xla=True)
entry(CE, "inputs", lambda: L.CharacterEncoder(6)(CHARS))

GF = at("layers.GatedFeedForward")
entry(GF, "intermediate_dim", lambda: L.GatedFeedForward(0))
entry(GF, "activation", lambda: L.GatedFeedForward(8, activation="swish"))
entry(GF, "lora_rank", lambda: L.GatedFeedForward(8, lora_rank=0))
entry(
    GF,
    "inputs",
    lambda: built(L.GatedFeedForward(8), X3)(RNG.normal(size=(2, 5, 6)).astype(F)),
    graph=True,
    xla=True,
)
entry(GF, "inputs", lambda: L.GatedFeedForward(8)(TEXT), graph=True, xla=True)

MOE = at("layers.MixtureOfExperts")
entry(MOE, "top_k", lambda: L.MixtureOfExperts(2, 3, 4))
entry(MOE, "num_experts", lambda: L.MixtureOfExperts(0, 1, 4))
entry(MOE, "normalize_top_k", lambda: L.MixtureOfExperts(2, 1, 4, normalize_top_k="yes"))
entry(
    MOE,
    "inputs",
    lambda: built(L.MixtureOfExperts(2, 1, 4), X3)(RNG.normal(size=(2, 5, 6)).astype(F)),
    graph=True,
    xla=True,
)
entry(MOE, "inputs", lambda: L.MixtureOfExperts(2, 1, 4)(TEXT), graph=True, xla=True)

GS = at("layers.GatherSteps")
entry(GS, "inputs", lambda: L.GatherSteps()(X3), graph=True, xla=True)
entry(GS, "index", lambda: L.GatherSteps()([X3, np.array([[1, 9], [0, 2]])]))
entry(GS, "index", lambda: L.GatherSteps()([X3, np.array([[1, -1], [0, 2]])]))
entry(GS, "index", lambda: L.GatherSteps()([X3, np.ones((2, 2, 1), "int32")]), graph=True, xla=True)
entry(GS, "sequence", lambda: L.GatherSteps()([X3[0], np.array([[1, 2]])]), graph=True, xla=True)

LB = at("layers.LlamaDecoderBlock")
entry(LB, "num_key_value_heads", lambda: L.LlamaDecoderBlock(4, 16, num_key_value_heads=3))
entry(LB, "query_key_norm", lambda: L.LlamaDecoderBlock(4, 16, query_key_norm=-1.0))
entry(LB, "rotary_dim", lambda: L.LlamaDecoderBlock(4, 16, rotary_dim=0))
entry(LB, "experts", lambda: L.LlamaDecoderBlock(2, 8, experts={"experts": 2})(X3))
entry(LB, "rope_layout", lambda: L.LlamaDecoderBlock(2, 16, rope_layout="gptj"))
entry(LB, "rope_scaling", lambda: L.LlamaDecoderBlock(2, 16, rope_scaling={"type": "yarn"}))
entry(LB, "window", lambda: L.LlamaDecoderBlock(2, 16, window=0))
entry(
    LB,
    "padding_mask",
    lambda: L.LlamaDecoderBlock(2, 16)(X3, padding_mask=np.ones((2, 3), bool)),
    graph=True,
    xla=True,
)
entry(
    LB, "cache_index", lambda: L.LlamaDecoderBlock(2, 16)(X3, cache_index=1), graph=True, xla=True
)
entry(LB, "num_heads", lambda: L.LlamaDecoderBlock(8, 16)(X3), graph=True, xla=True)

RC = at("layers.RecurrentCell")
entry(RC, "units", lambda: L.RecurrentCell(0))
entry(RC, "dropout", lambda: L.RecurrentCell(4, dropout=1.0))
entry(RC, "recurrent_dropout", lambda: L.RecurrentCell(4, recurrent_dropout=-0.5))

RS = at("layers.ReverseSequence")
entry(RS, "inputs", lambda: L.ReverseSequence()(X3[0, 0]), graph=True, xla=True)
entry(RS, "mask", lambda: L.ReverseSequence()(X3, mask=np.ones((2, 4), bool)), graph=True, xla=True)
entry(
    RS,
    "mask",
    lambda: L.ReverseSequence()(X3, mask=np.array([[0, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)),
)

RE = at("layers.RotaryEmbedding")
entry(RE, "base", lambda: L.RotaryEmbedding(base=1.0))
entry(RE, "layout", lambda: L.RotaryEmbedding(layout="neox"))
entry(RE, "rotary_dim", lambda: L.RotaryEmbedding(rotary_dim=3))
entry(RE, "scaling", lambda: L.RotaryEmbedding(scaling={"type": "linear", "factor": 0}))
entry(RE, "inputs", lambda: L.RotaryEmbedding()(X3), graph=True, xla=True)
entry(RE, "rotary_dim", lambda: L.RotaryEmbedding(rotary_dim=8)(X4), graph=True, xla=True)

SM = at("layers.ScalarMix")
entry(SM, "num_layers", lambda: L.ScalarMix(0))
entry(SM, "trainable_weights_init", lambda: L.ScalarMix(2, trainable_weights_init=[0.0]))
entry(SM, "trainable_weights_init", lambda: L.ScalarMix(2, trainable_weights_init=["a", "b"]))
entry(SM, "inputs", lambda: L.ScalarMix(2)([X3, X3, X3]), graph=True, xla=True)
entry(SM, "inputs", lambda: L.ScalarMix(2)([X3, X3[:, :3]]), graph=True, xla=True)
entry(
    SM, "mask", lambda: L.ScalarMix(2)([X3, X3], mask=np.ones((2, 3), bool)), graph=True, xla=True
)

TD = at("layers.TokenDropout")
entry(TD, "rate", lambda: L.TokenDropout(1.0))
entry(TD, "rate", lambda: L.TokenDropout("0.1"))
entry(TD, "unk_id", lambda: L.TokenDropout(0.1, unk_id=-1))
entry(TD, "inputs", lambda: L.TokenDropout(0.1)(TEXT, training=True), graph=True, xla=True)

WS = at("layers.WindowScaling")
entry(WS, "epsilon", lambda: L.WindowScaling(epsilon=-1.0))
entry(WS, "inverse", lambda: L.WindowScaling(inverse="yes"))
entry(WS, "series", lambda: L.WindowScaling()(X3[0]), graph=True, xla=True)
entry(WS, "values", lambda: L.WindowScaling(inverse=True)(X3), graph=True, xla=True)
entry(
    WS,
    "values",
    lambda: L.WindowScaling()(X3, RNG.normal(size=(2, 2, 6)).astype(F)),
    graph=True,
    xla=True,
)

AL = at("layers.all_layers")
entry(AL, "layer", lambda: L.all_layers(None))
entry(AL, "layer", lambda: L.all_layers("model"))
entry(AL, "layer", lambda: L.all_layers([L.CRF(3)]))

# ---- metrics -------------------------------------------------------------------
opt_out(
    at("metrics.BitsPerCharacter"),
    "a callback without arguments: Keras calls it with its own epoch logs, "
    "whose `val_loss` `bits_per_character` checks",
)

ROWS = [["EU", "rejects"], ["Peter"]]
ROW_TAGS = [["B-ORG", "O"], ["B-PER"]]
EF = at("metrics.EntityF1")
entry(EF, "tags", lambda: metrics.EntityF1(lambda w: {}, ["O"], ROWS, ROW_TAGS[:1]))
entry(EF, "tags", lambda: metrics.EntityF1(lambda w: {}, ["O"], ROWS, [["B-ORG"], ["B-PER"]]))
entry(EF, "features", lambda: metrics.EntityF1("words", ["O"], ROWS, ROW_TAGS))
entry(EF, "tag_vocabulary", lambda: metrics.EntityF1(lambda w: {}, "O", ROWS, ROW_TAGS))

BPC = at("metrics.bits_per_character")
entry(BPC, "nats", lambda: metrics.bits_per_character(None))
entry(BPC, "nats", lambda: metrics.bits_per_character("1.2"))
entry(BPC, "nats", lambda: metrics.bits_per_character(-0.5))
entry(BPC, "nats", lambda: metrics.bits_per_character(np.array([1.0, 2.0])))

PROBS = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6]])
CR = at("metrics.classification_report")
entry(CR, "labels", lambda: metrics.classification_report(PROBS, [0, 1], ["neg", "pos"]))
entry(CR, "names", lambda: metrics.classification_report(PROBS, [0, 1, 1], ["neg"]))
entry(CR, "labels", lambda: metrics.classification_report(PROBS, [0, 1, 2], ["neg", "pos"]))
entry(CR, "labels", lambda: metrics.classification_report(PROBS, [0, 0.5, 1], ["neg", "pos"]))
entry(
    CR,
    "probabilities",
    lambda: metrics.classification_report(PROBS * np.nan, [0, 1, 1], ["neg", "pos"]),
)

BLEU = at("metrics.corpus_bleu")
entry(BLEU, "hypotheses", lambda: metrics.corpus_bleu(["a dog ."], ["a dog .", "a cat ."]))
entry(BLEU, "hypotheses", lambda: metrics.corpus_bleu("a dog .", "a dog ."))
entry(BLEU, "references", lambda: metrics.corpus_bleu(["a dog ."], [["a dog .", "the dog ."]]))
entry(BLEU, "hypotheses", lambda: metrics.corpus_bleu([None], ["a dog ."]))

LOGITS = np.zeros((1, 2, 4))
NLL = at("metrics.token_nll")
entry(NLL, "targets", lambda: metrics.token_nll(LOGITS, np.array([[1.0, 2.0]])))
entry(NLL, "logits", lambda: metrics.token_nll(LOGITS, np.array([[1, 2, 3]])))
entry(NLL, "targets", lambda: metrics.token_nll(LOGITS, np.array([[1, 4]])))
entry(NLL, "targets", lambda: metrics.token_nll(LOGITS, np.array([[1, -1]])))
entry(NLL, "logits", lambda: metrics.token_nll(np.full((1, 2, 4), "x"), np.array([[1, 2]])))


def uniform(ids):
    return np.zeros(ids.shape + (4,))


ONES = np.ones((3, 2), "int32")
WN = at("metrics.windows_nll")
entry(WN, "targets", lambda: metrics.windows_nll(uniform, ONES, ONES[:2]))
entry(WN, "batch_size", lambda: metrics.windows_nll(uniform, ONES, ONES, batch_size=0))
entry(WN, "batch_size", lambda: metrics.windows_nll(uniform, ONES, ONES, batch_size=2.0))
entry(WN, "predict", lambda: metrics.windows_nll("model", ONES, ONES))

# ---- plots -------------------------------------------------------------------
BINS = [(1, 10), (11, 99)]
LBINS = at("plots.length_bins")
entry(LBINS, "bins", lambda: plots.length_bins([3, 12], [(10, 1)]))
entry(LBINS, "bins", lambda: plots.length_bins([3, 12], [1, 10]))
entry(LBINS, "bins", lambda: plots.length_bins([3, 12], []))
entry(LBINS, "lengths", lambda: plots.length_bins(["3", "12"], BINS))

PA = at("plots.plot_attention")
entry(PA, "weights", lambda: plots.plot_attention(NEVER, np.ones((3, 2)), ["a", "b", "c"], ["x"]))
entry(PA, "weights", lambda: plots.plot_attention(NEVER, np.ones((2, 3)), ["a", "b", "c"]))
entry(PA, "columns", lambda: plots.plot_attention(NEVER, np.ones(3), None))
entry(PA, "weights", lambda: plots.plot_attention(NEVER, [["a", "b"]], ["a", "b"], ["x"]))

PBL = at("plots.plot_by_length")
entry(
    PBL, "scores", lambda: plots.plot_by_length(NEVER, BINS, {"lstm": [80.0]}, [5, 3], "", "", "")
)
entry(PBL, "counts", lambda: plots.plot_by_length(NEVER, BINS, {"lstm": [8, 7]}, [5], "", "", ""))
entry(PBL, "scores", lambda: plots.plot_by_length(NEVER, BINS, [80.0, 70.0], [5, 3], "", "", ""))
entry(PBL, "bins", lambda: plots.plot_by_length(NEVER, [(9, 1)], {"a": [1.0]}, [5], "", "", ""))


def history_csv(text="epoch,loss,val_loss\n0,2.0,2.1\n1,1.5,1.7\n"):
    path = os.path.join(tempfile.mkdtemp(), "history.csv")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


PC = at("plots.plot_curves")
entry(
    PC,
    "history",
    lambda: plots.plot_curves("/nonexistent/history.csv", NEVER, "", "loss"),
    (FileNotFoundError, ValueError),
)
entry(PC, "metric", lambda: plots.plot_curves(history_csv(), NEVER, "", "loss", metric="acc"))
entry(PC, "history", lambda: plots.plot_curves(history_csv("step,loss\n0,2.0\n"), NEVER, "", "l"))

RUN = ({"model": "gru", "parameters": 1000}, [{"loss": "2.0", "val_loss": "2.1"}] * 2, [1.0, 2.0])
PRT = at("plots.plot_runs_against_time")
entry(PRT, "runs", lambda: plots.plot_runs_against_time([], NEVER, "loss", ""))
entry(
    PRT,
    "runs",
    lambda: plots.plot_runs_against_time([({"model": "gru"}, RUN[1], RUN[2])], NEVER, "", ""),
)
entry(PRT, "runs", lambda: plots.plot_runs_against_time([RUN[:2] + ([1.0],)], NEVER, "", ""))
entry(PRT, "ylim", lambda: plots.plot_runs_against_time([RUN], NEVER, "", "", ylim=1.0))

SERIES = np.arange(20.0)
DATES = [str(i) for i in range(20)]
MEDIAN = np.zeros((2, 4, 1))
PF = at("plots.plot_forecast")
entry(PF, "horizon", lambda: plots.plot_forecast(NEVER, DATES, SERIES, 12, [12, 16], 0, []))
entry(PF, "start", lambda: plots.plot_forecast(NEVER, DATES, SERIES, 25, [12, 16], 4, []))
entry(PF, "origins", lambda: plots.plot_forecast(NEVER, DATES, SERIES, 12, [], 4, []))
entry(PF, "dates", lambda: plots.plot_forecast(NEVER, DATES[:5], SERIES, 12, [12, 16], 4, []))
entry(
    PF,
    "forecasts",
    lambda: plots.plot_forecast(
        NEVER, DATES, SERIES, 12, [12, 16], 4, [("gru", MEDIAN[:1], None, None)]
    ),
)


# -- entity spans and scores (seqkeras.data.entities) --------------------------

_TAGS = [["B-PER", "I-PER", "O"], ["B-LOC"]]
entry("seqkeras.metrics.entity_spans", "tags", lambda: _metrics().entity_spans("B-PER I-PER"))
entry("seqkeras.metrics.entity_spans", "tags", lambda: _metrics().entity_spans(["B-PER", 3]))
entry("seqkeras.metrics.entity_spans", "tags", lambda: _metrics().entity_spans(["PER"]))
entry("seqkeras.metrics.entity_spans", "tags", lambda: _metrics().entity_spans(None))
entry(
    "seqkeras.metrics.entity_scores",
    "predicted_tags",
    lambda: _metrics().entity_scores(_TAGS, _TAGS[:1]),
)
entry(
    "seqkeras.metrics.entity_scores",
    "predicted_tags",
    lambda: _metrics().entity_scores(_TAGS, [["B-PER", "I-PER"], ["B-LOC"]]),
)
entry("seqkeras.metrics.entity_scores", "true_tags", lambda: _metrics().entity_scores(None, _TAGS))
entry(
    "seqkeras.metrics.entity_scores",
    "predicted_tags",
    lambda: _metrics().entity_scores(_TAGS, [["B-PER", "X-PER", "O"], ["B-LOC"]]),
)
entry(
    "seqkeras.metrics.entity_scores",
    "true_tags",
    lambda: _metrics().entity_scores(["B-PER I-PER O"], [["B-PER", "I-PER", "O"]]),
)


def _metrics():
    from seqkeras import metrics

    return metrics
