"""The GPU engine's plans without a GPU: the workspace plan (fused final pass, term
planes, column blocks) and the fused pass's term table against the job it encodes."""

import numpy as np
import pytest

from emublas.backends.ozaki2 import gpu_stages, gpu_workspace, pipeline, recipes


def _plan(m, n, k, budget, *, nmod=16, nprod=1, pl=1, transposed=False, resident=None):
    resident = nmod * nprod if resident is None else resident
    return gpu_workspace.workspace_plan(m, n, k, nmod, nprod, pl, nmod, transposed, False, budget, resident)


def test_the_fused_pass_is_chosen_when_every_product_fits():
    n = 4096
    need = 16 * n * n * 4 + 16 * n * 2 * n  # the products of 16 moduli, one residue pass of both factors
    assert _plan(n, n, n, need) == (n, 16, True)
    nb, batch, fused = _plan(n, n, n, need - 1)
    assert not fused and nb == n and batch == 16  # the term planes of 16 moduli need far less


def test_the_fused_pass_takes_transposed_terms_whole_and_needs_products():
    n = 1024
    huge = 2**40
    # rank-k terms read a product transposed: fused, the whole square output in one block
    assert _plan(n, n, n, huge, transposed=True) == (n, 16, True)
    assert _plan(n, n, n, huge, resident=0)[2] is False


def test_a_small_budget_still_blocks_columns():
    nb, batch, fused = _plan(1024, 1024, 256, 2_000_000)
    assert not fused and nb < 1024
    with pytest.raises(MemoryError, match="workspace"):
        _plan(1024, 1024, 256, 1000)


def _root(m):
    """A square root of −1 modulo m, or None."""
    return next((r for r in range(2, m) if r * r % m == m - 1), None)


def _job(name, moduli, k=100):
    roots = [_root(m) if name != "real" else None for m in moduli]
    return pipeline.job(recipes.for_moduli(name, roots), moduli, roots, k)


@pytest.mark.parametrize("name", ["syrk", "herk", "csyr2k"])
def test_the_fused_term_table_marks_transposed_reads(name):
    """The rank-k recipes read their second product transposed: the table says so in bit 30
    of the second product's index, and the product itself is still the job's."""
    moduli = (257, 241, 233, 229)  # each with a square root of −1 (the split and 2M kinds)
    roots = [_root(m) for m in moduli]
    jb = pipeline.job(recipes.for_moduli(name, roots), moduli, roots, 100)
    assert jb.transposed
    spec, _ = gpu_stages.fused_table(jb)
    flag = gpu_stages.TRANSPOSED
    for l in range(jb.nmod):
        for t, (_, p1, t1, _w1, p2, t2, _w2) in enumerate(jb.terms[l]):
            s1, s2 = (int(v) for v in spec[jb.slot[l] + t, :2])
            assert not t1 and s1 == l * jb.nprod + p1
            assert (s2 & flag != 0) == bool(t2) and (s2 & ~flag) == l * jb.nprod + p2


@pytest.mark.parametrize("name", ["real", "2m"])
def test_the_fused_term_table_encodes_the_job(name, monkeypatch):
    from emublas.backends.ozaki2 import scaling

    monkeypatch.setattr(scaling, "K_CHUNK", 40)  # three k-chunks: slots per chunk
    # 2M: 255 has no square root of −1, so its recipe is 3M, with three products
    moduli = (256, 255, 253, 251, 247, 241, 239) if name == "real" else (257, 255, 241, 233, 229)
    jb = _job(name, moduli)
    assert jb.nprod == (1 if name == "real" else 3)
    assert jb.nchunks == 3
    spec, mods = gpu_stages.fused_table(jb)
    assert spec.shape == (jb.nterms, 4) and mods.shape == (jb.nmod, 3)
    assert spec[:, 0].max() < gpu_workspace.fused_products(jb) and spec[:, 1].max() < gpu_workspace.fused_products(jb)
    for l in range(jb.nmod):
        m = jb.moduli[l]
        assert tuple(mods[l]) == (m, 1.0 / m, 0.5 / m if m % 2 == 0 else 0.0)
        nt = len(jb.terms[l])
        for c in range(jb.nchunks):
            for t, (_, p1, _t1, w1, p2, _t2, w2) in enumerate(jb.terms[l]):
                s1, s2, w12, mod = (int(v) for v in spec[jb.slot[l] + c * nt + t])
                base = (l * jb.nchunks + c) * jb.nprod
                assert (s1, s2, mod) == (base + p1, -1 if p2 is None else base + p2, l)
                # the kernel's split: int16 low half (sign-extended), arithmetic shift for the high half
                low = w12 & 0xFFFF
                assert (low - 0x10000 if low >= 0x8000 else low, w12 >> 16) == (w1, w2)
    assert np.any(spec[:, 2] < 0) or name == "real"  # negative weights are encoded too
    # the real recipe's terms read one product each (the kernel's oz_crt_fused1 form), 2M's two
    assert bool((spec[:, 1] < 0).all()) == (name == "real")
