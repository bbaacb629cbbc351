"""`TokenDropout`: word dropout (UNK replacement) on token ids."""

import keras
from keras import ops

from seqkeras.layers import validation


@keras.saving.register_keras_serializable(package="seqkeras")
class TokenDropout(keras.layers.Layer):
    """During training, replaces each real token id by `unk_id` with
    probability `rate` (Lample et al. 2016's "singleton replacement",
    Iyyer et al. 2015's word dropout): the model learns an embedding for
    unknown words and does not lean on any single word. Padding (id 0)
    and ids below `first_id` (the reserved BOS/EOS/UNK) are kept. At
    inference the ids pass unchanged.

    Args:
        rate: the replacement probability, in [0, 1).
        unk_id: the id that replaces a token (`seqkeras.data.UNK`, 3).
        first_id: the first id that may be replaced (4: real tokens).
        seed: the random seed.

    Call arguments:
        inputs: token ids, any shape (integers, or floats holding
            integers as Keras' `Embedding` accepts).
        training: replace only when true.

    Examples:
        >>> import numpy as np, seqkeras
        >>> drop = seqkeras.layers.TokenDropout(0.5, seed=0)
        >>> ids = np.array([[5, 6, 7, 8, 0, 0]])
        >>> np.asarray(drop(ids)).tolist()  # inference: unchanged
        [[5, 6, 7, 8, 0, 0]]
        >>> out = np.asarray(drop(ids, training=True))
        >>> bool(np.all((out == ids) | (out == 3))), out[0, 4:].tolist()
        (True, [0, 0])
    """

    def __init__(self, rate, unk_id=3, first_id=4, seed=None, **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self.rate = validation.rate("TokenDropout", "rate", rate)
        self.unk_id = validation.non_negative_int("TokenDropout", "unk_id", unk_id)
        self.first_id = validation.non_negative_int("TokenDropout", "first_id", first_id)
        self.seed = validation.seed("TokenDropout", "seed", seed)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True

    #: Streaming (inference): no state, and no work.
    stream_state_sizes = ()

    def stream_step(self, x, states):
        """One streamed step at inference: `x` unchanged, no state."""
        return x, []

    def __call__(self, *args, **kwargs):
        # strings refused before Keras converts the arguments to backend
        # tensors (on JAX that conversion fails first, with a bare error)
        validation.numeric_arguments("TokenDropout", ("inputs",), args, kwargs)
        return super().__call__(*args, **kwargs)

    def call(self, inputs, training=False):
        validation.numeric("TokenDropout", "inputs", inputs)
        if not training or self.rate == 0.0:
            return inputs
        draw = keras.random.uniform(ops.shape(inputs), seed=self.seed_generator)
        replace = ops.logical_and(draw < self.rate, inputs >= self.first_id)
        return ops.where(replace, ops.cast(self.unk_id, inputs.dtype), inputs)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate, unk_id=self.unk_id, first_id=self.first_id, seed=self.seed)
        return config
