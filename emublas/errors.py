"""Exception types raised by emublas.

Everything is a subclass of a builtin so that ``except ValueError`` keeps
working for callers that do not know about emublas.
"""


class BackendUnavailableError(RuntimeError):
    """The selected backend cannot run here (extension not built, no GPU, ...)."""


class OzakiAccuracyWarning(UserWarning):
    """Ozaki-II cannot reach native accuracy with the moduli in use.

    Raised as a warning when the inputs' exponent span needs more bits than the
    chosen moduli give; the message says how many moduli would do.
    """
