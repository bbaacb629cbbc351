"""seqkeras: sequence models for Keras 3 that train under XLA and export."""

__version__ = "0.1.0"

from seqkeras import layers  # noqa: E402

__all__ = ["layers", "__version__"]
