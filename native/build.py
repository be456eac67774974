"""cffi builder for ``emublas._kernels._cpu`` (out-of-line API mode).

Used by setup.py (``cffi_modules=["native/build.py:ffibuilder"]``), which runs
from the project root, so source paths are given relative to that root.  Run
``python3 native/build.py`` (from anywhere) to build the extension under
build/cffi and copy it into emublas/_kernels for development.

The build is portable: no ``-march=native``.  SIMD kernels are compiled per
function with ``__attribute__((target(...)))`` and chosen at run time.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CPU_DIR = os.path.join(HERE, "cpu")
PACKAGE_DIR = os.path.join(ROOT, "emublas", "_kernels")

HEADER = os.path.join(CPU_DIR, "emublas_cpu.h")
INCLUDE_DIR = os.path.join(HERE, "include")  # headers shared with native/cuda
CONSTANTS = os.path.join(INCLUDE_DIR, "emublas_constants.h")


def public_headers() -> list[str]:
    """The public headers: ``emublas_cpu.h`` first, then every other ``emublas_*.h``
    (one per kernel family, so that each family declares its own API)."""
    others = sorted(p for p in glob.glob(os.path.join(CPU_DIR, "emublas_*.h")) if p != HEADER)
    return [HEADER] + others


def cdef_from_header(path: str = HEADER) -> str:
    """The cffi cdef: the header's declarations, read from the header itself.

    The part between the ``extern "C"`` guards, comments removed, and each
    ``#define NAME value`` turned into cffi's ``#define NAME ...`` (the value
    is taken from the compiled header), so the API is written down once.
    """
    with open(path) as fh:
        text = fh.read()
    body = text.split('extern "C" {', 1)[1].split("#ifdef __cplusplus", 1)[0]
    body = body.split("#endif", 1)[1]  # past the guard that opened extern "C"
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    body = re.sub(r"^#define\s+(\w+)\s+.*$", r"#define \1 ...", body, flags=re.M)
    return body


#: An integer constant of the shared header: literals, earlier names, + - * << and parentheses.
_INT_DEFINE = re.compile(r"^#define[ \t]+(EMUBLAS_\w+)[ \t]+([0-9A-Z_()+\-*< \t]+?)[ \t]*$", re.M)


def cdef_constants(path: str = CONSTANTS) -> str:
    """The cffi cdef of the shared header: ``#define NAME ...`` for each integer
    constant, so that ``lib.NAME`` is the value the C sources were compiled with.
    (Floating-point constants and the inline helpers stay C and CUDA only.)"""
    with open(path) as fh:
        text = re.sub(r"/\*.*?\*/", "", fh.read(), flags=re.S)
    return "\n".join(f"#define {name} ..." for name, _ in _INT_DEFINE.findall(text))


def _compile_args() -> list[str]:
    if sys.platform == "win32":  # MSVC: the sources need pthreads; not supported yet
        return ["/O2"]
    return [
        "-O3",
        "-std=c11",
        "-pthread",
        "-fvisibility=hidden",  # only PyInit__cpu needs to be exported
        "-ffp-contract=fast",  # FMAs in the float kernel (exact either way)
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
    ]


def make_builder(absolute_paths: bool = False) -> cffi.FFI:
    """The FFI builder.  Paths are relative to the project root (where setup.py
    runs) unless absolute_paths is set."""

    def path(p: str) -> str:
        return p if absolute_paths else os.path.relpath(p, ROOT)

    builder = cffi.FFI()
    headers = public_headers()
    builder.cdef("\n".join([cdef_constants()] + [cdef_from_header(h) for h in headers]))
    builder.set_source(
        "emublas._kernels._cpu",
        "\n".join(f'#include "{os.path.basename(h)}"' for h in [CONSTANTS] + headers),
        sources=sorted(path(p) for p in glob.glob(os.path.join(CPU_DIR, "*.c"))),
        depends=sorted(path(p) for p in glob.glob(os.path.join(CPU_DIR, "*.h")) + [CONSTANTS]),
        include_dirs=[path(CPU_DIR), path(INCLUDE_DIR)],
        extra_compile_args=_compile_args(),
        extra_link_args=[] if sys.platform == "win32" else ["-pthread"],
        # One file name (_cpu.cpython-3XX-...so) whether setuptools or
        # compile() below builds it, so neither build shadows the other.
        py_limited_api=False,
    )
    return builder


ffibuilder = make_builder(absolute_paths=__name__ == "__main__")

if __name__ == "__main__":
    # Build under build/cffi, then put the module where `import
    # emublas._kernels._cpu` finds it, replacing any other build of it (a
    # stale _cpu.abi3.so from pip would otherwise be shadowed, or shadow).
    built = ffibuilder.compile(tmpdir=os.path.join(ROOT, "build", "cffi"), verbose=True)
    for old in glob.glob(os.path.join(PACKAGE_DIR, "_cpu.*so")) + glob.glob(os.path.join(PACKAGE_DIR, "_cpu.*pyd")):
        os.remove(old)
    shutil.copy2(built, os.path.join(PACKAGE_DIR, os.path.basename(built)))
    print(f"installed {os.path.basename(built)} into {PACKAGE_DIR}")
