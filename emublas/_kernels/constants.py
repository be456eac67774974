"""The constants that the C, CUDA and Python kernels share, read from their one header.

``native/include/emublas_constants.h`` (shipped as ``emublas/_kernels/include/``)
defines them once.  The C extension carries the values it was compiled with
(``emublas._kernels._cpu.lib.EMUBLAS_*``, declared to cffi by ``native/build.py``)
and :mod:`emublas._kernels.cpu` checks its arguments against those; this module
reads the header's text, so that module-level constants and the GPU path (whose
CUDA sources include the same header) need no C extension.  A test checks that
the two agree.
"""

from __future__ import annotations

import ast
import operator
import os
import re

__all__ = [
    "HEADER",
    "header_path",
    "read_header",
    "OZ_MAX_MODULI",
    "OZ_MAX_TERMS",
    "OZ_FUSED_MAX_TERMS",
    "OZ_FUSED1_ROWS",
    "OZ_PAD",
    "OZ_RES_TILES",
    "I8GEMM_K_EXACT",
    "OZ_K_CHUNK",
    "OZ_DEAD",
    "OZ_FIX_SPARSE",
]

#: File name of the shared header.
HEADER = "emublas_constants.h"

_HERE = os.path.dirname(os.path.abspath(__file__))
_FOLDERS = (
    os.path.join(_HERE, "include"),  # a wheel (setup.py copies it there)
    os.path.join(os.path.dirname(os.path.dirname(_HERE)), "native", "include"),
)  # a source checkout

# The header's rule for integer constants (see its opening comment): literals,
# earlier EMUBLAS_* names, + - * << and parentheses, on one line.
_DEFINE = re.compile(r"^#define[ \t]+(EMUBLAS_\w+)[ \t]+([0-9A-Z_()+\-*< \t]+?)[ \t]*$", re.M)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.LShift: operator.lshift}


def header_path(name: str = HEADER) -> str:
    """Path of the shared header ``name`` (installed copy first, then the source tree).

    Parameters
    ----------
    name : str, optional
        The header's file name; the shared constants' header by default.

    Returns
    -------
    str
        The header's path.

    Raises
    ------
    FileNotFoundError
        Neither the installed copy nor the source tree's ``native/include`` exists.
    """
    for folder in _FOLDERS:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"header {name!r} not found in {', '.join(_FOLDERS)}")


def _value(node: ast.AST, known: dict[str, int], name: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, known, name)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left, known, name), _value(node.right, known, name))
    raise ValueError(f"{HEADER}: {name} is not an integer expression of literals and earlier constants")


def read_header(path: str | None = None) -> dict[str, int]:
    """The integer constants of the shared header, by name (``EMUBLAS_...``).

    Parameters
    ----------
    path : str, optional
        The header to read; default :func:`header_path`.

    Returns
    -------
    dict of str to int
    """
    with open(path or header_path()) as fh:
        text = re.sub(r"/\*.*?\*/", "", fh.read(), flags=re.S)
    values: dict[str, int] = {}
    for name, expr in _DEFINE.findall(text):
        values[name] = _value(ast.parse(expr.strip(), mode="eval").body, values, name)
    return values


_VALUES = read_header()

#: Moduli one residue pass takes (CPU and GPU).
OZ_MAX_MODULI: int = _VALUES["EMUBLAS_OZ_MAX_MODULI"]
#: CRT terms the GPU finalize holds in shared memory.
OZ_MAX_TERMS: int = _VALUES["EMUBLAS_OZ_MAX_TERMS"]
#: CRT terms the GPU's fused final pass (straight from the products) holds.
OZ_FUSED_MAX_TERMS: int = _VALUES["EMUBLAS_OZ_FUSED_MAX_TERMS"]
#: Output rows one lane of the real gemm's fused final pass (oz_crt_fused1_real) takes.
OZ_FUSED1_ROWS: int = _VALUES["EMUBLAS_OZ_FUSED1_ROWS"]
#: 32 x 32 tiles one block of the GPU residue kernels takes in turn.
OZ_RES_TILES: int = _VALUES["EMUBLAS_OZ_RES_TILES"]
#: Padding of the GPU residue planes (and the CUDA kernels' tile edge).
OZ_PAD: int = _VALUES["EMUBLAS_OZ_PAD"]
#: The int8 GEMM is exact in int32 for k below this.
I8GEMM_K_EXACT: int = _VALUES["EMUBLAS_I8GEMM_K_EXACT"]
#: k per int8 GEMM of a long product (below the exactness limit, a multiple of OZ_PAD).
OZ_K_CHUNK: int = _VALUES["EMUBLAS_OZ_K_CHUNK"]
#: The shift of a row holding NaN or Inf.
OZ_DEAD: int = _VALUES["EMUBLAS_OZ_DEAD"]
#: Flagged entries per 32 x 32 tile that the GPU fallback recomputes one by one.
OZ_FIX_SPARSE: int = _VALUES["EMUBLAS_OZ_FIX_SPARSE"]
