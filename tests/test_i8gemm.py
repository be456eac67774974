"""Tests of the int8 x int8 -> int32 GEMM leaf (emublas._kernels.cpu.i8gemm).

Every result is compared exactly with an int64 numpy product (wrapped to
int32 where a test provokes wraparound).  Each test draws a fresh seed (the
``seed`` fixture of conftest.py) and names it in its assertion messages; replay
a failure with ``EMUBLAS_TEST_SEED=<seed>``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from emublas._kernels import cpu

pytestmark = pytest.mark.skipif(not cpu.available(), reason=f"C extension not built: {cpu.load_error()}")

HAS_VNNI = cpu.available() and cpu.features()["avx512_vnni"]
needs_vnni = pytest.mark.skipif(not HAS_VNNI, reason="CPU lacks AVX-512 VNNI")
HAS_AMX = cpu.available() and cpu.features()["amx_int8"]
needs_amx = pytest.mark.skipif(not HAS_AMX, reason="CPU, OS or build lacks AMX int8")
HAS_AVX2 = cpu.available() and cpu.features()["avx2"]
needs_avx2 = pytest.mark.skipif(not HAS_AVX2, reason="CPU lacks AVX2+FMA")

#: Every implementation the public API offers; "avx2", "vnni" and "amx" are skipped without them.
IMPLS = [
    "generic",
    pytest.param("avx2", marks=needs_avx2),
    pytest.param("vnni", marks=needs_vnni),
    pytest.param("amx", marks=needs_amx),
    "auto",
]

#: The kernels this CPU runs besides the reference ("generic").
FAST_IMPLS = (["avx2"] if HAS_AVX2 else []) + (["vnni"] if HAS_VNNI else []) + (["amx"] if HAS_AMX else [])

# Register tiles and cache blocks of the kernels (native/cpu): the shapes
# below straddle all of them.
#   VNNI:          MR 8, NR 48, KC 1024, MC 192, NC 4096, k padded to 4
#   AMX:           MR 32, NR 32, KC 2048, MC 64, NC 2048, k padded to 64
#   generic/AVX2:  MR 6, NR 16, KC 512,  MC 96,  NC 2048
#   generic/base:  MR 6, NR 8
#   avx2:          MR 6, NR 16, KC 384,  MC 144, NC 4096, k padded to 2
SHAPES = [  # (m, n, k)
    (1, 1, 1),
    (1, 1, 7),
    (2, 3, 1),
    (17, 33, 5),
    (31, 1, 129),
    (1, 31, 129),
    (8, 48, 4),
    (9, 49, 3),
    (7, 47, 6),
    (6, 16, 2),
    (16, 96, 8),
    (100, 37, 1),
    (65, 130, 67),
    (193, 97, 1030),  # two k-slices (VNNI), three (generic); two A blocks (generic)
    (385, 50, 33),  # several A blocks (MC)
    (3, 4200, 19),  # several B blocks (NC) for both kernels
    (255, 257, 259),
    (301, 203, 517),
    (97, 70, 2100),  # AMX: two k-slices, a k tail inside a 64-deep step, edge tiles both ways
    (33, 2100, 65),  # AMX: two B blocks (NC), one row past a register tile
]


@dataclass
class Seeded:
    """A fresh generator and the seed that replays it."""

    seed: int
    rng: np.random.Generator

    def i8(self, shape: tuple[int, ...]) -> np.ndarray:
        """Uniform int8 over the full range, with both extremes present."""
        x = self.rng.integers(-128, 128, size=shape, dtype=np.int8)
        if x.size >= 2:
            x.flat[0] = -128
            x.flat[-1] = 127
        return x

    def i32(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.integers(-(2**31), 2**31, size=shape, dtype=np.int32)


@pytest.fixture
def seeded(seed: int) -> Seeded:
    """Built on conftest's ``seed``: fresh per test, or EMUBLAS_TEST_SEED."""
    return Seeded(seed, np.random.default_rng(seed))


def ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact product in int64."""
    return a.astype(np.int64) @ b.astype(np.int64)


def wrap32(x: np.ndarray) -> np.ndarray:
    """Reduce int64 values to int32 with two's-complement wraparound."""
    return ((x.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def check(got: np.ndarray, want: np.ndarray, s: Seeded, what: str) -> None:
    assert got.dtype == np.int32, f"{what}: dtype {got.dtype} (seed={s.seed})"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape} (seed={s.seed})"
    np.testing.assert_array_equal(got, want, err_msg=f"{what} (seed={s.seed})")


def i8gemm_baseline(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The portable kernel built for the baseline ISA (C impl code 3), called
    directly: the public API picks its AVX2 build where the CPU has AVX2."""
    ffi, lib = cpu.require()
    m, k = a.shape
    n = b.shape[1]
    c = np.empty((m, n), dtype=np.int32)
    p = lambda x, t: ffi.cast(t, x.__array_interface__["data"][0])  # noqa: E731
    rc = lib.emublas_i8gemm(
        lib.EMUBLAS_IMPL_GENERIC_BASELINE,
        m,
        n,
        k,
        p(a, "int8_t *"),
        a.strides[0],
        a.strides[1],
        p(b, "int8_t *"),
        b.strides[0],
        b.strides[1],
        p(c, "int32_t *"),
        c.strides[0] // 4,
        c.strides[1] // 4,
        0,
        2,
    )
    assert rc == 0, f"baseline kernel returned {rc}"
    return c


# ---- exactness over shapes ---------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_shapes_exact(seeded: Seeded, impl: str, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    want = ref(a, b)
    assert np.abs(want).max() < 2**31  # no wraparound at these k
    got = cpu.i8gemm(a, b, impl=impl)
    check(got, want, seeded, f"{impl} {m}x{n}x{k}")
    assert got.flags.f_contiguous


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n,k", [(17, 33, 5), (31, 1, 129), (1, 31, 129), (65, 130, 67), (255, 257, 259)])
def test_row_major_out(seeded: Seeded, impl: str, m: int, n: int, k: int) -> None:
    # C-ordered out takes the kernel's direct-store path (no transposition).
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    out = np.full((m, n), 12345, dtype=np.int32)
    got = cpu.i8gemm(a, b, out, impl=impl)
    assert got is out
    check(out, ref(a, b), seeded, f"{impl} C-order out {m}x{n}x{k}")


def test_extreme_values(seeded: Seeded) -> None:
    # All -128 (the worst case for the u8 offset trick) and all 127.
    for va, vb in [(-128, -128), (-128, 127), (127, 127), (127, -128)]:
        a = np.full((19, 77), va, dtype=np.int8)
        b = np.full((77, 53), vb, dtype=np.int8)
        for impl in ["generic"] + FAST_IMPLS:
            got = cpu.i8gemm(a, b, impl=impl)
            check(got, ref(a, b), seeded, f"{impl} constant {va}*{vb}")
    baseline = i8gemm_baseline(a, b)
    check(baseline, ref(a, b), seeded, "baseline constant")


# ---- zero-sized dimensions -------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n", [(1, 1), (5, 3), (64, 100)])
def test_k_zero(seeded: Seeded, impl: str, m: int, n: int) -> None:
    a = np.empty((m, 0), dtype=np.int8)
    b = np.empty((0, n), dtype=np.int8)
    got = cpu.i8gemm(a, b, impl=impl)
    check(got, np.zeros((m, n), dtype=np.int32), seeded, f"{impl} k=0")
    out = seeded.i32((m, n))
    cpu.i8gemm(a, b, out, impl=impl)
    check(out, np.zeros((m, n), dtype=np.int32), seeded, f"{impl} k=0 into out")
    out = seeded.i32((m, n))
    before = out.copy()
    cpu.i8gemm(a, b, out, accumulate=True, impl=impl)
    check(out, before, seeded, f"{impl} k=0 accumulate leaves out alone")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (4, 0, 3), (0, 0, 0), (0, 7, 0)])
def test_m_or_n_zero(seeded: Seeded, impl: str, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    got = cpu.i8gemm(a, b, impl=impl)
    assert got.shape == (m, n), f"seed={seeded.seed}"
    assert got.dtype == np.int32


# ---- strides: views, transposes, slices ------------------------------------------


def _views(x: np.ndarray, s: Seeded) -> dict[str, np.ndarray]:
    """The same matrix in many memory layouts (all equal to x)."""
    r, c = x.shape
    big = s.i8((2 * r + 3, 3 * c + 2))
    big[1 : 1 + 2 * r : 2, 2 : 2 + 3 * c : 3] = x
    rev = np.ascontiguousarray(x[::-1, ::-1])
    return {
        "C": np.ascontiguousarray(x),
        "F": np.asfortranarray(x),
        "T-view": np.ascontiguousarray(x.T).T,
        "sliced": big[1 : 1 + 2 * r : 2, 2 : 2 + 3 * c : 3],
        "negative": rev[::-1, ::-1],
    }


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n,k", [(17, 33, 5), (50, 61, 72), (9, 100, 130)])
def test_input_layouts(seeded: Seeded, impl: str, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    want = ref(a, b)
    for na, va in _views(a, seeded).items():
        for nb, vb in _views(b, seeded).items():
            assert np.array_equal(va, a) and np.array_equal(vb, b)
            got = cpu.i8gemm(va, vb, impl=impl)
            check(got, want, seeded, f"{impl} a:{na} b:{nb}")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n,k", [(96, 64, 128), (70, 66, 200), (33, 97, 131)])
def test_every_order_of_a_b_and_out(seeded: Seeded, impl: str, m: int, n: int, k: int) -> None:
    """C and F orders of all three operands, at shapes with whole 32-row panels and 64-deep k
    steps (the AMX kernel's block-transposing packs) and tails of both."""
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    want = ref(a, b)
    for oa in "CF":
        for ob in "CF":
            for oc in "CF":
                out = np.empty((m, n), dtype=np.int32, order=oc)
                cpu.i8gemm(np.array(a, order=oa), np.array(b, order=ob), out, impl=impl)
                check(out, want, seeded, f"{impl} a:{oa} b:{ob} out:{oc}")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("accumulate", [False, True])
def test_out_layouts(seeded: Seeded, impl: str, accumulate: bool) -> None:
    m, n, k = 37, 53, 41
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    big = seeded.i32((3 * m + 1, 2 * n + 5))
    outs = {
        "C": np.zeros((m, n), dtype=np.int32),
        "F": np.zeros((m, n), dtype=np.int32, order="F"),
        "sliced": big[1 : 1 + 3 * m : 3, 3 : 3 + 2 * n : 2],
        "T-view": np.zeros((n, m), dtype=np.int32).T,
        "negative": np.zeros((m, n), dtype=np.int32)[::-1, ::-1],
        "sliced-F": np.asfortranarray(seeded.i32((m + 4, n + 2)))[2 : 2 + m, 1 : 1 + n],
    }
    for name, out in outs.items():
        start = out.copy()
        guard = big.copy() if name == "sliced" else None
        got = cpu.i8gemm(a, b, out, accumulate=accumulate, impl=impl)
        assert got is out, f"{name}: out not returned (seed={seeded.seed})"
        want = wrap32(start.astype(np.int64) + ref(a, b)) if accumulate else ref(a, b)
        check(out, want, seeded, f"{impl} out:{name} accumulate={accumulate}")
        if guard is not None:  # elements between the view's must be untouched
            mask = np.ones(big.shape, dtype=bool)
            mask[1 : 1 + 3 * m : 3, 3 : 3 + 2 * n : 2] = False
            assert np.array_equal(big[mask], guard[mask]), f"wrote outside out (seed={seeded.seed})"


@pytest.mark.parametrize("impl", IMPLS)
def test_broadcast_inputs(seeded: Seeded, impl: str) -> None:
    # Zero strides: every row of a (every column of b) is the same memory.
    m, n, k = 40, 70, 90
    a = np.broadcast_to(seeded.i8((1, k)), (m, k))
    b = np.broadcast_to(seeded.i8((k, 1)), (k, n))
    assert a.strides[0] == 0 and b.strides[1] == 0
    check(cpu.i8gemm(a, b, impl=impl), ref(a, b), seeded, f"{impl} broadcast inputs")


def test_out_unaligned(seeded: Seeded) -> None:
    # An int32 view at an odd byte offset: computed in scratch, copied back.
    m, n, k = 13, 21, 17
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    raw = np.zeros(4 * m * n + 1, dtype=np.uint8)
    out = raw[1:].view(np.int32).reshape(m, n)
    assert not out.flags.aligned
    cpu.i8gemm(a, b, out)
    check(out, ref(a, b), seeded, "unaligned out")


def test_out_shares_memory_with_input(seeded: Seeded) -> None:
    # a lives inside out's buffer: the product must use a's values from
    # before the call, not half-overwritten ones.
    m, n, k = 16, 16, 8
    out = np.zeros((m, n), dtype=np.int32)
    a = out.view(np.int8).reshape(m, 4 * n)[:, :k]
    a[...] = seeded.i8((m, k))
    b = seeded.i8((k, n))
    want = ref(a.copy(), b)
    cpu.i8gemm(a, b, out)
    check(out, want, seeded, "out aliasing a")


# ---- implementations, threads, accumulation -------------------------------------


@needs_vnni
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 33, 5), (64, 65, 66), (200, 300, 1100), (5, 2500, 40)])
def test_impls_identical(seeded: Seeded, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    g = cpu.i8gemm(a, b, impl="generic")
    v = cpu.i8gemm(a, b, impl="vnni")
    base = i8gemm_baseline(a, b)
    assert np.array_equal(g, v), f"generic != vnni (seed={seeded.seed})"
    assert np.array_equal(g, base), f"generic != baseline generic (seed={seeded.seed})"
    check(v, ref(a, b), seeded, "vnni")
    if HAS_AMX:
        assert np.array_equal(g, cpu.i8gemm(a, b, impl="amx")), f"generic != amx (seed={seeded.seed})"


@pytest.mark.parametrize("m,n,k", [(17, 33, 5), (255, 257, 259), (301, 203, 517), (1, 31, 129), (65, 1, 700)])
def test_baseline_generic_exact(seeded: Seeded, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    check(i8gemm_baseline(a, b), ref(a, b), seeded, f"baseline {m}x{n}x{k}")


# ---- the AVX2 integer kernel (int16 pairs, vpmaddwd) --------------------------------------


@needs_avx2
@pytest.mark.parametrize(
    "m,n,k",
    [
        (1, 1, 1),
        (1, 1, 2),
        (6, 16, 1),
        (6, 16, 3),
        (7, 17, 5),
        (5, 15, 15),  # under one tile both ways
        (12, 32, 16),  # whole tiles, one 16-deep register-path block of k
        (13, 33, 17),  # one past each
        (48, 48, 31),  # the register pack paths with an odd k tail
        (97, 200, 385),  # two k-slices (KC 384), the second one odd-sized
        (145, 70, 770),  # two A blocks (MC 144), balanced k-slices
        (300, 5, 1001),
        (2, 4100, 9),  # two B blocks (NC 4096)
    ],
)
def test_avx2_exact_and_identical(seeded: Seeded, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    want = ref(a, b)
    g = cpu.i8gemm(a, b, impl="generic")
    for oa in "CF":
        for ob in "CF":
            for oc in "CF":
                out = np.empty((m, n), dtype=np.int32, order=oc)
                cpu.i8gemm(np.array(a, order=oa), np.array(b, order=ob), out, impl="avx2")
                check(out, want, seeded, f"avx2 {m}x{n}x{k} a:{oa} b:{ob} out:{oc}")
                assert np.array_equal(out, g), f"avx2 != generic (seed={seeded.seed})"


@needs_avx2
@pytest.mark.parametrize("k", [1, 2, 3, 16, 17, 33, 384, 385, 1001])
def test_avx2_minus_128_pairs(seeded: Seeded, k: int) -> None:
    # -128 * -128 + -128 * -128 = 32768 is the largest pair sum vpmaddwd forms from
    # int8 data: one past int16, but it lands in an int32 lane and does not saturate.
    for va, vb in [(-128, -128), (-128, 127), (127, -128), (127, 127)]:
        for oa, ob in [("C", "F"), ("F", "C"), ("C", "C"), ("F", "F")]:
            a = np.full((13, k), va, dtype=np.int8, order=oa)
            b = np.full((k, 35), vb, dtype=np.int8, order=ob)
            got = cpu.i8gemm(a, b, impl="avx2")
            check(got, np.full((13, 35), va * vb * k, dtype=np.int32), seeded, f"avx2 {va}*{vb} k={k} {oa}{ob}")


@needs_avx2
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("m,n,k", [(301, 203, 517), (1000, 17, 1100), (17, 1000, 1101)])
def test_avx2_threads_and_accumulate(seeded: Seeded, threads: int, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    want = ref(a, b)
    check(cpu.i8gemm(a, b, impl="avx2", threads=threads), want, seeded, f"avx2 threads={threads}")
    out = seeded.i32((m, n))
    start = out.copy()
    cpu.i8gemm(a, b, out, accumulate=True, impl="avx2", threads=threads)
    check(out, wrap32(start.astype(np.int64) + want), seeded, f"avx2 accumulate threads={threads}")


@needs_avx2
def test_avx2_strided_views(seeded: Seeded) -> None:
    # Strides that are neither the k nor the item dimension contiguous (scalar packing),
    # negative strides and a strided out, against the reference.
    m, n, k = 29, 45, 37
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    want = ref(a, b)
    for na, va in _views(a, seeded).items():
        for nb, vb in _views(b, seeded).items():
            out = np.zeros((2 * m, 3 * n), dtype=np.int32)[::2, ::-3]
            cpu.i8gemm(va, vb, out, impl="avx2")
            check(out, want, seeded, f"avx2 a:{na} b:{nb} strided out")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n,k", [(200, 300, 300), (1000, 17, 1100), (17, 1000, 1100), (97, 101, 1800)])
def test_thread_counts_identical(seeded: Seeded, impl: str, m: int, n: int, k: int) -> None:
    # Large enough (>= 2^24 multiply-adds) that the call really goes parallel.
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    want = ref(a, b)
    one = cpu.i8gemm(a, b, impl=impl, threads=1)
    check(one, want, seeded, f"{impl} threads=1")
    for t in (2, 3, 8):
        got = cpu.i8gemm(a, b, impl=impl, threads=t)
        assert np.array_equal(got, one), f"{impl} threads={t} differs from threads=1 (seed={seeded.seed})"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("m,n,k", [(17, 33, 5), (64, 50, 1030), (300, 200, 400)])
def test_accumulate(seeded: Seeded, impl: str, m: int, n: int, k: int) -> None:
    a, b = seeded.i8((m, k)), seeded.i8((k, n))
    out = seeded.i32((m, n))  # full int32 range: the sums wrap
    start = out.copy()
    cpu.i8gemm(a, b, out, accumulate=True, impl=impl)
    check(out, wrap32(start.astype(np.int64) + ref(a, b)), seeded, f"{impl} accumulate")
    # Accumulating twice adds the product twice.
    cpu.i8gemm(a, b, out, accumulate=True, impl=impl)
    check(out, wrap32(start.astype(np.int64) + 2 * ref(a, b)), seeded, f"{impl} accumulate x2")


@pytest.mark.parametrize("impl", IMPLS)
def test_wraparound_mod_2_32(seeded: Seeded, impl: str) -> None:
    # k large enough that the true sums leave int32: the result is the sum
    # modulo 2^32, identically for every implementation.
    k = 140_000
    a = np.full((2, k), -128, dtype=np.int8)
    a[1] = seeded.i8((k,))
    b = np.full((k, 3), -128, dtype=np.int8)
    b[:, 2] = seeded.i8((k,))
    want = ref(a, b)
    assert want[0, 0] == 16384 * k and want[0, 0] >= 2**31  # really wraps
    got = cpu.i8gemm(a, b, impl=impl)
    check(got, wrap32(want), seeded, f"{impl} wraparound")


def test_concurrent_callers(seeded: Seeded) -> None:
    # Python threads calling at once (the GIL is released): the pool serves
    # one and the others run on their own thread; all results exact.
    a, b = seeded.i8((300, 400)), seeded.i8((400, 250))
    want = ref(a, b)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                results[i] = cpu.i8gemm(a, b, threads=2)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not errors, f"{errors!r} (seed={seeded.seed})"
    assert len(results) == 4
    for r in results.values():
        check(r, want, seeded, "concurrent caller")


def _wait_child(pid: int, seeded: Seeded) -> None:
    """Wait up to a minute for a forked child; fail if it hangs or exits non-zero."""
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"i8gemm hung in a forked child (seed={seeded.seed})")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0, f"wrong result in child (seed={seeded.seed})"


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="needs fork")
def test_fork_after_threads(seeded: Seeded) -> None:
    # The pool is reset in a forked child (it has no workers); a parallel call
    # there must neither hang nor be wrong.
    a, b = seeded.i8((300, 200)), seeded.i8((200, 300))
    want = ref(a, b)
    cpu.i8gemm(a, b, threads=2)  # make sure the parent's pool exists
    pid = os.fork()
    if pid == 0:  # child
        try:
            ok = np.array_equal(cpu.i8gemm(a, b, threads=2), want)
        finally:
            os._exit(0 if ok else 1)
    _wait_child(pid, seeded)


def _pool_cpu_ticks() -> int:
    """CPU time (clock ticks) the pool's workers have used so far."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                if f.read().strip() != "emublas-pool":
                    continue
            with open(f"/proc/self/task/{task}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def test_held_pool_results_and_nesting(seeded: Seeded) -> None:
    # Holding changes when the workers sleep and how small a product is split, never a
    # result; holds nest, and a release without a hold is harmless.
    a, b = seeded.i8((200, 300)), seeded.i8((300, 250))
    want = ref(a, b)
    small_a, small_b = seeded.i8((100, 90)), seeded.i8((90, 110))  # split only when held
    with cpu.held_pool():
        check(cpu.i8gemm(small_a, small_b, threads=2), ref(small_a, small_b), seeded, "held, small")
        check(cpu.i8gemm(a, b, threads=2), want, seeded, "held")
        with cpu.held_pool():
            check(cpu.i8gemm(a, b, threads=2), want, seeded, "held twice")
        check(cpu.i8gemm(a, b, threads=2), want, seeded, "still held")
    _, lib = cpu.require()
    lib.emublas_pool_hold(0)  # unmatched: ignored
    check(cpu.i8gemm(a, b, threads=2), want, seeded, "released")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_pool_workers_sleep_when_not_held(seeded: Seeded) -> None:
    # Released, the workers must not burn a core (a BLAS call made next needs it);
    # held but idle, they spin at most a few milliseconds before sleeping, and only the
    # last region's team: a pool grown to every CPU first leaves the others asleep.
    a, b = seeded.i8((256, 256)), seeded.i8((256, 256))
    big = seeded.i8((768, 768))
    cpu.i8gemm(big, big, threads=os.cpu_count() or 1)  # large enough to start every worker
    with cpu.held_pool():
        cpu.i8gemm(a, b, threads=2)
    time.sleep(0.05)
    before = _pool_cpu_ticks()
    time.sleep(0.3)
    assert _pool_cpu_ticks() - before <= 3, "pool workers used CPU while the pool was not held"
    with cpu.held_pool():
        cpu.i8gemm(a, b, threads=2)
        before = _pool_cpu_ticks()
        time.sleep(0.3)  # held, no work: one spin of at most 5 ms, then sleep
        spent = _pool_cpu_ticks() - before
    assert spent <= 5, f"held idle pool workers used {spent} ticks in 0.3 s"


def _whole_machine() -> bool:
    """Whether this process may use every online CPU (where the pool counts other work)."""
    return sys.platform == "linux" and len(os.sched_getaffinity(0)) == os.cpu_count()


def _team_settles(want, threads: int, timeout: float = 5.0) -> int:
    """Poll ``pool_team(threads)`` (each reading serves 1 ms) until ``want(team)`` or the timeout."""
    end = time.monotonic() + timeout
    team = cpu.pool_team(threads)
    while not want(team) and time.monotonic() < end:
        time.sleep(0.005)
        team = cpu.pool_team(threads)
    return team


def test_pool_team_bounds() -> None:
    # Never more than asked, never fewer than one thread.
    for threads in (-3, 0, 1, 2, 7):
        team = cpu.pool_team(threads)
        assert 1 <= team <= max(threads, 1), (threads, team)


@pytest.mark.skipif(not _whole_machine(), reason="the pool counts other work only on Linux with every CPU allowed")
def test_pool_team_leaves_busy_cpus_alone(seeded: Seeded) -> None:
    # With every CPU busy with another process's spinning thread (as OpenBLAS's workers
    # spin after its calls), a kernel runs on the caller's thread alone: the pool's
    # workers use no CPU time, the result is the same; once the spinners stop, the
    # team grows again (where it was larger than one before them).  A long region keeps
    # its team all the same.
    ncpu = os.cpu_count() or 1
    if ncpu < 2:
        pytest.skip("one CPU: no team to shrink")
    a, b = seeded.i8((384, 512)), seeded.i8((512, 384))
    want = ref(a, b)
    cpu.i8gemm(a, b, threads=ncpu)  # start the workers
    idle = _team_settles(lambda t: t > 1, ncpu, timeout=1.0) > 1  # no other work on the machine
    spin = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(ncpu)]
    try:
        team = _team_settles(lambda t: t == 1, ncpu)
        assert team == 1, f"{ncpu} spinning processes, yet a team of {team}"
        before = _pool_cpu_ticks()
        for _ in range(5):
            check(cpu.i8gemm(a, b, threads=ncpu), want, seeded, "busy machine")
            with cpu.held_pool():
                check(cpu.i8gemm(a, b, threads=ncpu), want, seeded, "busy machine, held")
        spent = _pool_cpu_ticks() - before
        assert spent <= 2, f"pool workers used {spent} ticks on a machine with no free CPU"
        # a long region keeps its team: the spinners it would wait out are usually another
        # library's workers, asleep within 0.1 s.  3072^3 is eight times 1536^3's work: at
        # 1536^3 the worker's share could fall under one 10 ms clock tick on a fast host, and
        # the test failed by chance
        big_a, big_b = seeded.i8((3072, 3072)), seeded.i8((3072, 3072))
        before = _pool_cpu_ticks()
        got = cpu.i8gemm(big_a, big_b, threads=2)  # one worker
        spent = _pool_cpu_ticks() - before
        assert spent >= 1, "a long region ran without the pool's workers on a busy machine"
        assert np.array_equal(got, cpu.i8gemm(big_a, big_b, threads=1)), f"long region (seed {seeded.seed})"
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    if idle:  # the team grows again (where the machine had other work before, it may still)
        team = _team_settles(lambda t: t > 1, ncpu)
        if team == 1 and _others_runnable() >= ncpu - 1:
            pytest.skip(
                f"another process keeps the CPUs busy ({_others_runnable()} runnable): no free CPU to grow into"
            )
        assert team > 1, f"spinners gone, yet a team of {team} of {ncpu}"


def _others_runnable() -> int:
    """Runnable threads other than this one, from /proc/loadavg (the pool reads the same count in C)."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0]) - 1


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="needs fork")
def test_fork_while_held(seeded: Seeded) -> None:
    # A child forked inside a hold starts unheld with no workers, and works.
    a, b = seeded.i8((300, 200)), seeded.i8((200, 300))
    want = ref(a, b)
    with cpu.held_pool():
        cpu.i8gemm(a, b, threads=2)
        pid = os.fork()
        if pid == 0:  # child
            try:
                ok = np.array_equal(cpu.i8gemm(a, b, threads=2), want)
                with cpu.held_pool():
                    ok = ok and np.array_equal(cpu.i8gemm(a, b, threads=2), want)
            finally:
                os._exit(0 if ok else 1)
    _wait_child(pid, seeded)


# ---- errors -------------------------------------------------------------------------


def test_type_errors(seeded: Seeded) -> None:
    a, b = seeded.i8((3, 4)), seeded.i8((4, 5))
    with pytest.raises(TypeError, match="dtype int8"):
        cpu.i8gemm(a.astype(np.int16), b)
    with pytest.raises(TypeError, match="dtype int8"):
        cpu.i8gemm(a, b.astype(np.float32))
    with pytest.raises(TypeError, match="dtype int8"):
        cpu.i8gemm(a, b.astype(np.uint8))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        cpu.i8gemm(a.tolist(), b)
    with pytest.raises(TypeError, match="dtype int32"):
        cpu.i8gemm(a, b, np.zeros((3, 5), dtype=np.int64))
    with pytest.raises(TypeError):
        cpu.i8gemm(a, b, threads=1.5)


def test_value_errors(seeded: Seeded) -> None:
    a, b = seeded.i8((3, 4)), seeded.i8((4, 5))
    with pytest.raises(ValueError, match=r"3x4.*5x5"):
        cpu.i8gemm(a, seeded.i8((5, 5)))
    with pytest.raises(ValueError, match="2-D"):
        cpu.i8gemm(a.ravel(), b)
    with pytest.raises(ValueError, match="2-D"):
        cpu.i8gemm(a, b[None])
    with pytest.raises(ValueError, match=r"out has shape 5x3.*3x5"):
        cpu.i8gemm(a, b, np.zeros((5, 3), dtype=np.int32))
    ro = np.zeros((3, 5), dtype=np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cpu.i8gemm(a, b, ro)
    with pytest.raises(ValueError, match="'auto', 'generic', 'avx2', 'vnni'"):
        cpu.i8gemm(a, b, impl="avx3")
    with pytest.raises(ValueError, match="threads"):
        cpu.i8gemm(a, b, threads=0)
    with pytest.raises(ValueError, match="accumulate"):
        cpu.i8gemm(a, b, accumulate=True)


def test_vnni_unsupported_raises(seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        cpu, "_features", {"avx512_vnni": False, "avx512_vpopcntdq": False, "amx_int8": False, "avx2": False}
    )
    a, b = seeded.i8((3, 4)), seeded.i8((4, 5))
    with pytest.raises(RuntimeError, match="VNNI"):
        cpu.i8gemm(a, b, impl="vnni")
    with pytest.raises(RuntimeError, match="AVX2"):
        cpu.i8gemm(a, b, impl="avx2")
    with pytest.raises(RuntimeError, match="AMX"):
        cpu.i8gemm(a, b, impl="amx")
    # The generic path still works.
    check(cpu.i8gemm(a, b, impl="generic"), ref(a, b), seeded, "generic with VNNI hidden")


def test_c_level_errors() -> None:
    ffi, lib = cpu.require()
    nul = ffi.NULL
    assert lib.emublas_i8gemm(99, 1, 1, 1, nul, 1, 1, nul, 1, 1, nul, 1, 1, 0, 1) == lib.EMUBLAS_EINVAL
    assert lib.emublas_i8gemm(0, -1, 1, 1, nul, 1, 1, nul, 1, 1, nul, 1, 1, 0, 1) == lib.EMUBLAS_EINVAL
    assert lib.emublas_i8gemm(0, 2, 2, 2, nul, 1, 1, nul, 1, 1, nul, 1, 1, 0, 1) == lib.EMUBLAS_EINVAL
    assert lib.emublas_i8gemm(0, 0, 5, 5, nul, 1, 1, nul, 1, 1, nul, 1, 1, 0, 1) == lib.EMUBLAS_OK
    if not HAS_VNNI:
        assert lib.emublas_i8gemm(2, 1, 1, 1, nul, 1, 1, nul, 1, 1, nul, 1, 1, 0, 1) == lib.EMUBLAS_ENOTSUP
    if not HAS_AMX:
        assert lib.emublas_i8gemm(4, 1, 1, 1, nul, 1, 1, nul, 1, 1, nul, 1, 1, 0, 1) == lib.EMUBLAS_ENOTSUP
    if not HAS_AVX2:
        assert lib.emublas_i8gemm(5, 1, 1, 1, nul, 1, 1, nul, 1, 1, nul, 1, 1, 0, 1) == lib.EMUBLAS_ENOTSUP
    assert lib.EMUBLAS_IMPL_AVX2 == 5


# ---- features, threads, probe ---------------------------------------------------------


def test_set_auto_kernel_pins_and_restores(seeded: Seeded) -> None:
    a, b = seeded.i8((70, 130)), seeded.i8((130, 90))
    builtin = cpu.kernel_name("auto")
    try:
        for impl in ["generic"] + FAST_IMPLS:
            cpu.set_auto_kernel(impl)
            assert cpu.kernel_name("auto") == cpu.kernel_name(impl)
            check(cpu.i8gemm(a, b), ref(a, b), seeded, f"auto pinned to {impl}")
    finally:
        cpu.set_auto_kernel("auto")
    assert cpu.kernel_name("auto") == builtin
    with pytest.raises(ValueError, match="impl="):
        cpu.set_auto_kernel("fastest")


def test_features_and_kernel_names() -> None:
    f = cpu.features()
    assert set(f) == {"avx512_vnni", "avx512_vpopcntdq", "amx_int8", "avx2"}
    assert all(isinstance(v, bool) for v in f.values())
    assert cpu.kernel_name("generic") in {"generic", "generic_avx2"}
    best = (
        "amx_int8"
        if f["amx_int8"]
        else "avx512_vnni"
        if f["avx512_vnni"]
        else "avx2"
        if f["avx2"]
        else cpu.kernel_name("generic")
    )
    assert cpu.kernel_name("auto") == best
    if f["avx2"]:
        assert cpu.kernel_name("avx2") == "avx2"
        assert cpu.kernel_name("generic") == "generic_avx2"  # "generic" stays the float kernel
    if f["amx_int8"]:
        assert cpu.kernel_name("amx") == "amx_int8"
    assert cpu.available() and cpu.load_error() is None


def test_default_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cpu.ENV_THREADS, raising=False)
    n = cpu.default_threads()
    assert isinstance(n, int) and n >= 1
    monkeypatch.setenv(cpu.ENV_THREADS, "3")
    assert cpu.default_threads() == 3
    for bad in ["0", "-2", "two", "1.5"]:  # empty means unset (tests/test_config.py)
        monkeypatch.setenv(cpu.ENV_THREADS, bad)
        with pytest.raises(ValueError, match=cpu.ENV_THREADS):
            cpu.default_threads()


def test_peak_probe() -> None:
    rate = cpu.vnni_peak_probe(threads=1, iters=200_000)
    if HAS_VNNI:
        assert rate > 1e9  # any AVX-512 VNNI core does far more than 1 G MAC/s
    else:
        assert rate == 0.0


def test_avx2_peak_probe_and_the_kernels_ceiling() -> None:
    """The AVX2 probe times its instruction pair where the CPU has AVX2 (0.0 elsewhere), and
    kernel_peak_probe names the probe of the kernel "auto" dispatches; bad iters are refused."""
    has = cpu.features()
    rate = cpu.avx2_peak_probe(threads=1, iters=200_000)
    if has["avx2"]:
        assert rate > 1e9  # any AVX2 core does far more than 1 G int16 MAC/s
    else:
        assert rate == 0.0
    peak, instructions = cpu.kernel_peak_probe(threads=1, iters=200_000)
    want = "vpdpbusd" if has["avx512_vnni"] else "vpmaddwd+vpaddd" if has["avx2"] else ""
    assert instructions == want and (peak > 1e9) == bool(want)
    with pytest.raises(ValueError, match="iters"):
        cpu.avx2_peak_probe(iters=0)
