"""Exception types raised by emublas.

Everything is a subclass of a builtin so that ``except ValueError`` keeps
working for callers that do not know about emublas.
"""


class BackendUnavailableError(RuntimeError):
    """The selected backend cannot run here (extension not built, no GPU, ...)."""


class OzakiAccuracyWarning(UserWarning):
    """Ozaki-II could not certify some output entries to native BLAS's error bound
    (or, with its ``bits`` option, to that many correct bits relative to ``Σ|a||b|``).

    Raised directly (accuracy at risk) when those entries were left as computed
    (``fallback="none"``); its subclass :class:`OzakiFallbackWarning` when they
    were recomputed.  The message says how many entries, with how many moduli.
    On cupy arrays it arrives with the next emublas call that finds the call's
    verdict ready, or at :func:`emublas.synchronize`.
    """


class OzakiFallbackWarning(OzakiAccuracyWarning):
    """Some entries were recomputed as float64 dot products: accurate, but slower.

    The certificate could not vouch for them with the moduli in use (a wide
    exponent span, or too few moduli); their values meet native BLAS's error
    bound.  Filter this class to silence it without silencing accuracy risks.
    """
