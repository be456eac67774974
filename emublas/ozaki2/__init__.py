"""Ozaki scheme II: exact int8 products modulo small moduli, rebuilt by CRT.

``moduli`` the tables and CRT constants, ``scaling`` the power-of-two shifts and
bounds, ``engine`` the per-modulus recipes (2M, rank-k identities) on the CPU,
``gpu_engine`` the same on cupy arrays, ``routines`` the BLAS routines,
``integer`` the exact integer product; ``distributed`` with ``blocks`` (numpy)
and ``gpu_blocks`` (cupy) the Dask path.
"""
from .routines import DEFAULT_MODULI, MODES, last_run

__all__ = ["DEFAULT_MODULI", "MODES", "last_run"]
