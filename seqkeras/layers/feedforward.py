"""`GatedFeedForward`: the gated linear unit feed-forward of modern
decoders (Shazeer 2020): `FFN(x) = (act(x W_gate) * (x W_up)) W_down`,
SwiGLU with `act = silu` (Llama, Qwen2, Mistral, SmolLM), GeGLU with
`gelu_tanh` (Gemma)."""

import keras
from keras import ops

from seqkeras.layers import lora
from seqkeras.layers import validation

_PACKAGE = "seqkeras"

#: The gate's activations: SiLU (SwiGLU), the tanh GELU (GeGLU as Gemma
#: has it, `gelu_pytorch_tanh`) and the exact GELU.
GATE_ACTIVATIONS = ("silu", "gelu_tanh", "gelu", "relu")


def _activate(name, x):
    if name == "silu":
        return ops.silu(x)
    if name == "gelu_tanh":
        return ops.gelu(x, approximate=True)
    if name == "gelu":
        return ops.gelu(x, approximate=False)
    return ops.relu(x)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class GatedFeedForward(keras.layers.Layer):
    """Gated feed-forward: `(act(x W_gate + b_gate) * (x W_up + b_up))
    W_down + b_down` (biases only with `use_bias`).

    The kernels are `gate_kernel` and `up_kernel` (d, intermediate_dim)
    and `down_kernel` (intermediate_dim, d): a torch `Linear`'s weight
    transposed. Given `step_weights=layer.prepare_step_weights()` (a
    decoding step) the gate and up kernels are one (d, 2 *
    intermediate_dim) product.

    Args:
        intermediate_dim: the gated width.
        activation: the gate's, one of `"silu"` (SwiGLU), `"gelu_tanh"`
            (GeGLU), `"gelu"`, `"relu"`.
        use_bias: biases on the three projections (Llama has none).
        output_dim: output width (default: the input's).
        kernel_initializer, bias_initializer: of the projections.
        lora_rank, lora_alpha: low-rank adapters on the three kernels
            (`seqkeras.layers.lora`; alpha defaults to the rank).

    Call arguments:
        inputs: (..., d). A Keras mask passes through unchanged.
        step_weights: optional `prepare_step_weights()`, made once per
            decoding request; default the variables.

    Examples:
        >>> import numpy as np, seqkeras
        >>> ffn = seqkeras.layers.GatedFeedForward(16)
        >>> tuple(ffn(np.ones((2, 3, 8), "float32")).shape)
        (2, 3, 8)
    """

    def __init__(
        self,
        intermediate_dim,
        activation="silu",
        use_bias=False,
        output_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        lora_rank=None,
        lora_alpha=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "GatedFeedForward"
        self.lora_rank, self.lora_alpha = lora.check(name, lora_rank, lora_alpha)
        self.intermediate_dim = validation.positive_int(name, "intermediate_dim", intermediate_dim)
        self.activation = validation.choice(name, "activation", activation, GATE_ACTIVATIONS)
        self.use_bias = validation.boolean(name, "use_bias", use_bias)
        self.output_dim = (
            None if output_dim is None else validation.positive_int(name, "output_dim", output_dim)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        d = input_shape[-1]
        if d is None:
            raise ValueError(
                "`GatedFeedForward` needs inputs with known features (..., d). "
                f"Received: inputs.shape={tuple(input_shape)}"
            )
        out = self.output_dim or d
        width = self.intermediate_dim

        def weight(name, shape, init):
            return self.add_weight(shape=shape, name=name, initializer=init)

        self.gate_kernel = weight("gate_kernel", (d, width), self.kernel_initializer)
        self.up_kernel = weight("up_kernel", (d, width), self.kernel_initializer)
        self.down_kernel = weight("down_kernel", (width, out), self.kernel_initializer)
        self.gate_bias = self.up_bias = self.down_bias = None
        if self.use_bias:
            self.gate_bias = weight("gate_bias", (width,), self.bias_initializer)
            self.up_bias = weight("up_bias", (width,), self.bias_initializer)
            self.down_bias = weight("down_bias", (out,), self.bias_initializer)
        if self.lora_rank:
            kernels = [(n, getattr(self, f"{n}_kernel"), 1) for n in ("gate", "up", "down")]
            lora.add_adapters(self, kernels)

    def _kernel(self, name):
        """The `name` kernel, its LoRA adapter added."""
        return lora.effective(self, name, getattr(self, f"{name}_kernel"))

    def prepare_step_weights(self):
        """The weights a decoding step reads (pass them as `step_weights`):
        the gate and up kernels side by side (one product), all in the
        compute dtype."""
        dtype = self.compute_dtype

        def cast(x):
            return None if x is None else ops.cast(x, dtype)

        fused = ops.concatenate([cast(self._kernel("gate")), cast(self._kernel("up"))], axis=1)
        bias = None
        if self.use_bias:
            bias = ops.concatenate([cast(self.gate_bias), cast(self.up_bias)], axis=0)
        down = (cast(self._kernel("down")), cast(self.down_bias))
        return {"gate_up": (fused, bias), "down": down}

    def __call__(self, *args, **kwargs):
        # strings refused before Keras converts the arguments to backend
        # tensors (on JAX that conversion fails first, with a bare error)
        validation.numeric_arguments("GatedFeedForward", ("inputs",), args, kwargs)
        return super().__call__(*args, **kwargs)

    def call(self, inputs, step_weights=None):
        validation.numeric("GatedFeedForward", "inputs", inputs)
        validation.features("GatedFeedForward", "inputs", inputs, self.gate_kernel.shape[0])
        shape = ops.shape(inputs)
        x = ops.reshape(inputs, (-1, inputs.shape[-1]))  # 2-D products
        prepared = step_weights
        width = self.intermediate_dim
        if prepared is not None:
            w, b = prepared["gate_up"]
            y = ops.matmul(x, w)
            if b is not None:
                y = y + b
            gate, up = y[:, :width], y[:, width:]
            w, b = prepared["down"]
        else:
            gate, up = ops.matmul(x, self._kernel("gate")), ops.matmul(x, self._kernel("up"))
            if self.use_bias:
                gate, up = gate + self.gate_bias, up + self.up_bias
            w, b = self._kernel("down"), self.down_bias
        y = ops.matmul(_activate(self.activation, gate) * up, w)
        if b is not None:
            y = y + b
        return ops.reshape(y, tuple(shape[:-1]) + (y.shape[-1],))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "lora_rank": self.lora_rank,
                "lora_alpha": self.lora_alpha,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MixtureOfExperts(keras.layers.Layer):
    """A mixture of gated feed-forward experts with top-k routing (the
    sparse MLP of Qwen3-Next, Qwen2-MoE and Mixtral): per position,
    `p = softmax(x W_router)`, the `top_k` largest kept (divided by their
    sum with `normalize_top_k`), and `y = sum_e p_e FFN_e(x)` with
    `FFN_e(x) = (act(x G_e) * (x U_e)) D_e`; with `shared_intermediate_dim`
    a shared expert is added, scaled by `sigmoid(x w_shared)`.

    Every expert is computed for every position and weighted (zero for
    those not chosen): the same numbers as routing, builtin ops only in
    TFLite (TOPK_V2, ONE_HOT, batched products) and no data-dependent
    shapes in any runtime; the cost grows with `num_experts`, so this
    suits models of a few experts (a checkpoint of hundreds loads, but
    runs every expert).

    Weights: `router_kernel` (d, experts), `expert_gate_kernel` and
    `expert_up_kernel` (experts, d, intermediate_dim), `expert_down_kernel`
    (experts, intermediate_dim, d); with a shared expert,
    `shared_expert` (a `GatedFeedForward`) and `shared_gate_kernel` (d, 1).

    Args:
        num_experts: the experts.
        top_k: experts per position (at most `num_experts`).
        intermediate_dim: each expert's gated width.
        shared_intermediate_dim: the shared expert's width (None: none).
        normalize_top_k: divide the kept probabilities by their sum.
        activation: the experts' gate activation (`"silu"`: SwiGLU).
        kernel_initializer: of every kernel.

    Call arguments:
        inputs: (..., d). A Keras mask passes through unchanged.
        step_weights: accepted and unused (the feed-forward signature of
            the decoder blocks).

    Examples:
        >>> import numpy as np, seqkeras
        >>> moe = seqkeras.layers.MixtureOfExperts(4, 2, 16, shared_intermediate_dim=8)
        >>> tuple(moe(np.ones((2, 3, 8), "float32")).shape)
        (2, 3, 8)
    """

    def __init__(
        self,
        num_experts,
        top_k,
        intermediate_dim,
        shared_intermediate_dim=None,
        normalize_top_k=True,
        activation="silu",
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = "MixtureOfExperts"
        self.num_experts = validation.positive_int(name, "num_experts", num_experts)
        self.top_k = validation.positive_int(name, "top_k", top_k)
        if self.top_k > self.num_experts:
            raise ValueError(
                f"`{name}` needs top_k <= num_experts. Received: top_k={top_k}, "
                f"num_experts={num_experts}"
            )
        self.intermediate_dim = validation.positive_int(name, "intermediate_dim", intermediate_dim)
        self.shared_intermediate_dim = (
            None
            if shared_intermediate_dim is None
            else validation.positive_int(name, "shared_intermediate_dim", shared_intermediate_dim)
        )
        self.normalize_top_k = validation.boolean(name, "normalize_top_k", normalize_top_k)
        self.activation = validation.choice(name, "activation", activation, GATE_ACTIVATIONS)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.shared_expert = None
        if self.shared_intermediate_dim is not None:
            self.shared_expert = GatedFeedForward(
                self.shared_intermediate_dim,
                activation=self.activation,
                kernel_initializer=kernel_initializer,
                dtype=self.dtype_policy,
                name="shared_expert",
            )
        self.supports_masking = True

    def build(self, input_shape):
        d = input_shape[-1]
        if d is None:
            raise ValueError(
                "`MixtureOfExperts` needs inputs with known features (..., d). "
                f"Received: inputs.shape={tuple(input_shape)}"
            )
        e, width = self.num_experts, self.intermediate_dim

        def weight(name, shape):
            init = keras.initializers.get(keras.initializers.serialize(self.kernel_initializer))
            return self.add_weight(shape=shape, name=name, initializer=init)

        self.router_kernel = weight("router_kernel", (d, e))
        self.expert_gate_kernel = weight("expert_gate_kernel", (e, d, width))
        self.expert_up_kernel = weight("expert_up_kernel", (e, d, width))
        self.expert_down_kernel = weight("expert_down_kernel", (e, width, d))
        if self.shared_expert is not None:
            self.shared_expert.build(input_shape)
            self.shared_gate_kernel = weight("shared_gate_kernel", (d, 1))

    def prepare_step_weights(self):
        """None: the step reads the variables."""
        return None

    def __call__(self, *args, **kwargs):
        validation.numeric_arguments("MixtureOfExperts", ("inputs",), args, kwargs)
        return super().__call__(*args, **kwargs)

    def routing(self, inputs):
        """Each position's weight on each expert, (..., num_experts): the
        top-k softmax probabilities (normalised), zero elsewhere."""
        logits = ops.matmul(ops.cast(inputs, "float32"), ops.cast(self.router_kernel, "float32"))
        probs = ops.softmax(logits, axis=-1)
        top, index = ops.top_k(probs, self.top_k)
        if self.normalize_top_k:
            top = top / ops.sum(top, axis=-1, keepdims=True)
        chosen = ops.one_hot(index, self.num_experts, dtype="float32")  # (..., k, experts)
        return ops.sum(chosen * ops.expand_dims(top, -1), axis=-2)

    def call(self, inputs, step_weights=None):
        validation.numeric("MixtureOfExperts", "inputs", inputs)
        validation.features("MixtureOfExperts", "inputs", inputs, self.router_kernel.shape[0])
        shape = ops.shape(inputs)
        x = ops.reshape(inputs, (-1, inputs.shape[-1]))  # (n, d)
        weights = ops.cast(self.routing(x), x.dtype)  # (n, experts)
        gate = ops.einsum("nd,edi->nei", x, self.expert_gate_kernel)
        up = ops.einsum("nd,edi->nei", x, self.expert_up_kernel)
        hidden = _activate(self.activation, gate) * up * ops.expand_dims(weights, -1)
        y = ops.einsum("nei,eid->nd", hidden, self.expert_down_kernel)
        if self.shared_expert is not None:
            shared = ops.sigmoid(ops.matmul(x, self.shared_gate_kernel))
            y = y + shared * self.shared_expert(x)
        return ops.reshape(y, tuple(shape[:-1]) + (y.shape[-1],))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_experts": self.num_experts,
                "top_k": self.top_k,
                "intermediate_dim": self.intermediate_dim,
                "shared_intermediate_dim": self.shared_intermediate_dim,
                "normalize_top_k": self.normalize_top_k,
                "activation": self.activation,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


#: the arguments of `MixtureOfExperts` a block's `experts=` dict may give
EXPERT_ARGUMENTS = (
    "num_experts",
    "top_k",
    "intermediate_dim",
    "shared_intermediate_dim",
    "normalize_top_k",
)


def expert_feedforward(where, experts, activation, kernel_initializer, dtype, name):
    """A block's `MixtureOfExperts` from its `experts` dict (checked)."""
    if not isinstance(experts, dict) or set(experts) - set(EXPERT_ARGUMENTS):
        raise ValueError(
            f"`{where}` expects `experts` to be a dict of `MixtureOfExperts` arguments "
            f"{EXPERT_ARGUMENTS}. Received: experts={experts!r}"
        )
    return MixtureOfExperts(
        activation=activation,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name=name,
        **experts,
    )
