"""What a model is trained for and whether to compile it with XLA: the
task a model declares or implies (`infer_task`) and the library's one
compile-mode policy (`choose_jit_compile`). Public as
`seqkeras.training.infer_task` and `seqkeras.training.choose_jit_compile`;
here, below the builders, so that `generate` can use them."""

import keras

TASKS = ("tokens", "classes", "regression")


def _first_output_shape(model):
    outputs = getattr(model, "outputs", None)
    if not outputs:
        return None
    return tuple(outputs[0].shape)


def infer_task(model):
    """The task `compile_model` uses for `model`: the `task` its class
    declares (every builder's class does: `"classes"` for classifiers,
    `"tokens"` for taggers, language models, seq2seq and conditioned
    decoders, `"regression"` for forecasters); for another model, read
    from its inputs and outputs: `"regression"` when no input is integer,
    `"classes"` for one logits vector per example (rank-2 output),
    `"tokens"` for logits per step (rank-3 output). Returns None when the
    model declares none and has no symbolic inputs and outputs (a
    subclassed model that was not built functionally).

    Args:
        model: a `keras.Model`.

    Returns:
        `"classes"`, `"tokens"`, `"regression"` or None.

    Raises:
        TypeError: a `model` that is not a `keras.Model`.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"`infer_task` expects `model` to be a keras.Model. Received: {type(model).__name__}"
        )
    declared = getattr(model, "task", None)
    if isinstance(declared, str) and declared in TASKS:
        return declared
    shape = _first_output_shape(model)
    if shape is None:
        return None
    integer = any("int" in str(t.dtype) for t in model.inputs)
    if not integer:
        return "regression"
    return "classes" if len(shape) == 2 else "tokens"


def _check_task(model, task):
    shape = _first_output_shape(model)
    if shape is None:
        return
    inferred = infer_task(model)
    expected_rank = {"tokens": 3, "classes": 2}.get(task)
    contradiction = None
    if expected_rank is not None and len(shape) != expected_rank:
        contradiction = f"task={task!r} needs logits of rank {expected_rank}, " + (
            "(batch, time, classes)" if expected_rank == 3 else "(batch, classes)"
        )
    elif expected_rank is not None and shape[-1] is not None and (shape[-1] < 2):
        contradiction = f"task={task!r} needs at least 2 logits per prediction"
    elif expected_rank is not None and inferred == "regression":
        contradiction = (
            f"task={task!r} needs token ids in (a model whose "
            "inputs are all float is a regression model)"
        )
    if contradiction:
        raise ValueError(
            f"`compile_model`: {contradiction}; model {model.name!r} "
            f"outputs shape {shape} (its task is {inferred!r}). Received: "
            f"task={task!r}. Leave `task` out to use the model's own."
        )


JIT_PURPOSES = ("train", "generate")


def choose_jit_compile(model=None, purpose="train"):
    """The compile mode `compile_model(jit_compile="auto")` (`purpose`
    "train") and `seqkeras.models.generate(jit_compile="auto")`
    ("generate") pick for `model` on this machine, and why: the one
    compile-mode policy of the library.

    - JAX: XLA (the backend always compiles).
    - TensorFlow under a `tf.distribute` strategy with more than one
      replica or worker: no XLA (XLA does not compile the cross-replica
      collectives on the CPU; Keras' own "auto" decides the same).
    - TensorFlow with a GPU or TPU: XLA, in every precision.
    - TensorFlow on CPUs only, with a float16/bfloat16 compute dtype
      (`mixed_bfloat16`): no XLA. XLA's CPU backend runs bfloat16 matmuls
      no faster than float32 (178 vs 184 GFLOP/s on a 2048^2 matmul here),
      TensorFlow's oneDNN kernels twice as fast (390); the layers' time
      loops stack their steps in O(1) without XLA.
    - TensorFlow on CPUs only, float32: XLA (it fuses the loop bodies).
    - Generation (`purpose="generate"`) on TensorFlow: XLA in every
      precision. A decoding step is small matmuls and many ops, so it is
      bound by per-op overhead, which XLA removes: a mixed_bfloat16
      Transformer LM (4 layers, d=128, V=1000, B=8) generated 6,433
      tokens/s with XLA and 1,681 as a plain graph on this CPU.

    Args:
        model: the model, for its compute dtype (default: the global
            dtype policy).
        purpose: `"train"` (default) or `"generate"`.

    Returns:
        `(jit_compile, reason)`: a bool and one sentence.

    Examples:
        >>> import seqkeras
        >>> jit, reason = seqkeras.training.choose_jit_compile()
        >>> isinstance(jit, bool) and isinstance(reason, str)
        True
    """
    if model is not None and not isinstance(model, keras.layers.Layer):
        raise TypeError(
            "`choose_jit_compile` expects `model` to be a keras.Model (or None: the global "
            f"dtype policy). Received: {type(model).__name__} {model!r}"
        )
    if purpose not in JIT_PURPOSES:
        raise ValueError(
            "`choose_jit_compile` received an invalid value for `purpose`: expected one of "
            f"{JIT_PURPOSES}. Received: purpose={purpose!r}"
        )
    backend = keras.backend.backend()
    if backend == "jax":
        return True, "JAX compiles every step with XLA"
    if backend != "tensorflow":
        return False, f"XLA is not used with the {backend} backend"
    if purpose == "generate":
        return True, (
            "generation: each decoding step is bound by per-op overhead, which XLA removes "
            "(4x the tokens/s of a plain graph for a mixed_bfloat16 model on this CPU)"
        )
    from seqkeras import distribute

    if distribute.distributes():
        return False, (
            "a tf.distribute strategy with more than one replica "
            "or worker: XLA does not compile its collectives on "
            "the CPU"
        )
    if any(not d.lower().startswith("cpu") for d in keras.distribution.list_devices()):
        return True, "an accelerator: XLA is the fast path there"
    policy = model.dtype_policy if model is not None else keras.config.dtype_policy()
    dtype = keras.backend.standardize_dtype(policy.compute_dtype)
    if dtype in ("bfloat16", "float16"):
        return False, (
            f"{dtype} on CPUs: TensorFlow's oneDNN kernels run "
            "it twice as fast as float32, XLA's CPU backend no "
            "faster"
        )
    return True, f"{dtype} on CPUs: XLA fuses the loop bodies"
