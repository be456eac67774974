"""emublas: BLAS-3 routines with scipy.linalg.blas signatures over emulation backends.

>>> import numpy as np, emublas
>>> a = np.random.rand(4, 3)
>>> c = emublas.dgemm(1.0, a, a, trans_b=1)            # the selected backend
>>> c = emublas.zherk(1.0, a + 1j * a, backend="native")  # one call's backend
>>> with emublas.use("native"):                         # a block's backend
...     c = emublas.gemm(2.0, a, a.T)
"""

from ._version import __version__
from .backends import ozaki2  # emublas.ozaki2.last_run() and the scheme's modules
from .backends.ozaki2.verdicts import synchronize
from .blas import ROUTINES as _ROUTINES
from .blas import gemm, hemm, her2k, herk, symm, syr2k, syrk, trmm, trsm
from .config import Selection, get_backend, set_backend, use
from .errors import BackendUnavailableError, OzakiAccuracyWarning, OzakiFallbackWarning
from .explain import auto_last, explain
from .info import info
from .integer import intmatmul
from .prefixed import cgemm, cherk, csyrk, dgemm, dsyrk, sgemm, ssyrk, zgemm, zherk, zsyrk
from .prefixed_2k import cher2k, csyr2k, dsyr2k, ssyr2k, zher2k, zsyr2k

# symm, hemm, trmm, trsm per prefix are built by emublas.level3 (taken from the front's table)

ssymm, dsymm, csymm, zsymm = (_ROUTINES[p + "symm"] for p in "sdcz")
chemm, zhemm = (_ROUTINES[p + "hemm"] for p in "cz")
strmm, dtrmm, ctrmm, ztrmm = (_ROUTINES[p + "trmm"] for p in "sdcz")
strsm, dtrsm, ctrsm, ztrsm = (_ROUTINES[p + "trsm"] for p in "sdcz")

__all__ = [
    "__version__",
    "ozaki2",
    "synchronize",
    "OzakiFallbackWarning",
    "gemm",
    "syrk",
    "herk",
    "syr2k",
    "her2k",
    "sgemm",
    "dgemm",
    "cgemm",
    "zgemm",
    "ssyrk",
    "dsyrk",
    "csyrk",
    "zsyrk",
    "cherk",
    "zherk",
    "ssyr2k",
    "dsyr2k",
    "csyr2k",
    "zsyr2k",
    "cher2k",
    "zher2k",
    "symm",
    "hemm",
    "trmm",
    "trsm",
    "ssymm",
    "dsymm",
    "csymm",
    "zsymm",
    "chemm",
    "zhemm",
    "strmm",
    "dtrmm",
    "ctrmm",
    "ztrmm",
    "strsm",
    "dtrsm",
    "ctrsm",
    "ztrsm",
    "use",
    "set_backend",
    "get_backend",
    "Selection",
    "info",
    "intmatmul",
    "explain",
    "auto_last",
    "BackendUnavailableError",
    "OzakiAccuracyWarning",
]
