"""Ozaki scheme II on the CPU: exact int8 products modulo small moduli, rebuilt by CRT.

``moduli`` the tables and CRT constants, ``scaling`` the power-of-two shifts and
bounds, ``engine`` the per-modulus recipes (2M, rank-k identities), ``routines``
the BLAS routines, ``integer`` the exact integer product.
"""
from .routines import DEFAULT_MODULI, MODES, last_run

__all__ = ["DEFAULT_MODULI", "MODES", "last_run"]
