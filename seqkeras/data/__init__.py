"""Data: synthetic tasks (the built-in defaults) and, later, file readers."""

from seqkeras.data.synthetic import adding_problem

__all__ = ["adding_problem"]
