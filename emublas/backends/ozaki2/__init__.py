"""Ozaki scheme II: exact int8 products modulo small moduli, rebuilt by CRT.

``moduli`` the tables and CRT constants, ``scaling`` the power-of-two shifts and
bounds, ``recipes`` the per-modulus recipes (2M, rank-k identities),
``pipeline`` the one driver (residues → int8 products → reduce → finalize) with
the stages of each device in ``cpu_stages`` and ``gpu_stages``, ``gpu_engine``
where a GPU call runs (one device or several), ``certify`` and ``verdicts`` the
per-entry accuracy check, ``routines`` the BLAS routines, ``integer`` the exact
integer product, ``distributed`` the Dask path (the same stages per block).
"""

from .routines import DEFAULT_MODULI, MODES, last_run

__all__ = ["DEFAULT_MODULI", "MODES", "last_run"]
