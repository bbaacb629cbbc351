"""seqkeras: sequence models for Keras 3 that train under XLA and export.

Namespaces: `seqkeras.layers` (keras.ops only), `seqkeras.models`
(functional builders), `seqkeras.training` (losses, metrics, schedules,
callbacks, `compile_model`, the model directory), `seqkeras.decoding`
(greedy, beam search, sampling over a step function), `seqkeras.data` (synthetic
tasks, vocabularies, readers), `seqkeras.export` (TensorFlow-specific: TFLite conversion and
checks; imported on demand, as it loads TensorFlow and LiteRT),
`seqkeras.distribute` (TensorFlow-specific: tf.distribute strategies by
name, TF_CONFIG checks; imported on demand), `seqkeras.metrics`
(evaluation metrics from predictions: NLL and bits per character,
per-class reports, BLEU; imported on demand).
"""

__version__ = "0.1.0"

from seqkeras import data  # noqa: E402
from seqkeras import decoding  # noqa: E402
from seqkeras import layers  # noqa: E402
from seqkeras import models  # noqa: E402
from seqkeras import training  # noqa: E402

__all__ = ["data", "decoding", "layers", "models", "training", "__version__"]
