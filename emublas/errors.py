"""Exception types raised by emublas.

Everything is a subclass of a builtin so that ``except ValueError`` keeps
working for callers that do not know about emublas.
"""


class BackendUnavailableError(RuntimeError):
    """The selected backend cannot run here (extension not built, no GPU, ...)."""
