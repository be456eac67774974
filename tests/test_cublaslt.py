"""cuBLASLt int8 TN products (emublas/_kernels/cublaslt.py) and the strided-batched gemmEx
(cublas_ext.gemm_i8_strided_batched) against exact int64 products.

Column-major storage on the device: A (k×m, lda) is held as a C-order (m, lda) array whose
row j is column j, so ``Cᵀ[j, i] = Σ_p A[i, p] · B[j, p]`` over the first k entries.
The GPU tests skip without cupy or a GPU (conftest.cupy_or_skip); the CPU ones run in CI.
"""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import cupy_or_skip

from emublas._kernels import cublaslt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------
# CPU: what can be checked without the library
# --------------------------------------------------------------------------


def test_imports_without_cupy():
    code = (
        "import sys; sys.modules['cupy'] = None\n"
        "import emublas._kernels.cublaslt as lt\n"
        "assert lt.available() is False\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_struct_layouts_match_the_header():
    # cublasLtMatmulAlgo_t: uint64_t data[8]
    assert ctypes.sizeof(cublaslt.Algo) == 64
    # cublasLtMatmulHeuristicResult_t: algo, size_t workspaceSize, cublasStatus_t state,
    # float wavesCount, int reserved[4]
    r = cublaslt.HeuristicResult
    assert ctypes.sizeof(r) == 96
    assert (r.algo.offset, r.workspaceSize.offset, r.state.offset, r.wavesCount.offset, r.reserved.offset) == (
        0,
        64,
        72,
        76,
        80,
    )
    assert ctypes.sizeof(cublaslt.HeuristicResult * 16) == 16 * 96


def test_enumerations_match_the_headers():
    lt = cublaslt
    assert (lt.CUDA_R_8I, lt.CUDA_R_32I, lt.CUBLAS_COMPUTE_32I) == (3, 10, 72)
    assert (lt.CUBLAS_OP_N, lt.CUBLAS_OP_T) == (0, 1)
    assert (lt.MATMUL_DESC_TRANSA, lt.MATMUL_DESC_TRANSB) == (3, 4)
    assert (lt.LAYOUT_BATCH_COUNT, lt.LAYOUT_STRIDED_BATCH_OFFSET) == (5, 6)
    assert lt.PREF_MAX_WORKSPACE_BYTES == 1
    assert (
        lt.PREF_MIN_ALIGNMENT_A_BYTES,
        lt.PREF_MIN_ALIGNMENT_B_BYTES,
        lt.PREF_MIN_ALIGNMENT_C_BYTES,
        lt.PREF_MIN_ALIGNMENT_D_BYTES,
    ) == (5, 6, 7, 8)
    assert lt.WORKSPACE_BYTES == 32 * 2**20


def test_shape_key_alignments_and_normalisation():
    s = cublaslt.shape(64, 48, 96, 96, 96, 64, a_ptr=0x1000 + 16, b_ptr=0x2000, c_ptr=0x3000 + 8)
    assert (s.align_a, s.align_b, s.align_c) == (16, 256, 8)
    # a single product ignores the strides: one key
    assert cublaslt.shape(64, 48, 96, 96, 96, 64, 1, 7, 9, 11) == cublaslt.shape(64, 48, 96, 96, 96, 64)
    # a batch stride limits the alignment of every product after the first
    b = cublaslt.shape(64, 48, 96, 96, 96, 64, 3, 96 * 64 + 16, 96 * 48, 64 * 48 + 2)
    assert (b.align_a, b.align_b, b.align_c) == (16, 256, 8)


@pytest.mark.parametrize(
    "args,match",
    [
        ((0, 48, 96, 96, 96, 64), "m must be"),
        ((64, 48, 96, 95, 96, 64), "lda must be at least 96"),
        ((64, 48, 96, 96, 96, 63), "ldc must be at least 64"),
        ((64, 48, 96, 96, 96, 64, 0), "batch must be"),
        ((64, 48, 96, 96, 96, 64, 2, -1, 0, 64 * 48), "stride_a must be non-negative"),
        ((64, 48, 96, 96, 96, 64, 2, 0, 0, 64 * 47), "outputs would overlap"),
        ((64, 48, 96.0, 96, 96, 64), "k must be an int"),
    ],
)
def test_shape_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        cublaslt.shape(*args)


def test_heuristics_rejects_bad_alignment_and_count():
    with pytest.raises(ValueError, match="align_b must be a power of two"):
        cublaslt.heuristics(64, 48, 96, 96, 96, 64, align_b=24)
    with pytest.raises(ValueError, match="count must be a positive int"):
        cublaslt.heuristics(64, 48, 96, 96, 96, 64, count=0)


# --------------------------------------------------------------------------
# GPU
# --------------------------------------------------------------------------


@pytest.fixture
def cp():
    cp = cupy_or_skip()
    if not cublaslt.available():
        pytest.skip("libcublasLt cannot be loaded")
    return cp


def _planes(rng, batch, cols, ld, k):
    """int8 planes in [-127, 127] as (batch, cols, ld) arrays; padding rows filled with noise."""
    return rng.integers(-127, 128, size=(batch, cols, ld), dtype=np.int8)


def _reference(a, b, k, m, n):
    """(batch, n, m) int64: per plane, column j of C = Aᵀ·B (first k of each stored column)."""
    a64 = a[:, :m, :k].astype(np.int64)
    b64 = b[:, :n, :k].astype(np.int64)
    return np.einsum("zip,zjp->zji", a64, b64)


def _device_buffers(cp, a, b, c_shape, offsets):
    """Device copies of a, b (flat, starting ``offsets`` bytes into a larger allocation) and a C."""
    oa, ob, oc = offsets
    da = cp.zeros(a.size + oa, cp.int8)
    da[oa:] = cp.asarray(a.ravel())
    db = cp.zeros(b.size + ob, cp.int8)
    db[ob:] = cp.asarray(b.ravel())
    dc = cp.full(int(np.prod(c_shape)) + oc // 4, -1, cp.int32)
    return da, db, dc, (da.data.ptr + oa, db.data.ptr + ob, dc.data.ptr + oc)


def _read_c(cp, dc, oc, c_shape, m):
    return cp.asnumpy(dc[oc // 4 :]).reshape(c_shape)[:, :, :m]


CASES = [
    # m, n, k, lda, ldb, ldc, batch, byte offsets of A, B, C
    (64, 48, 96, 96, 96, 64, 1, (0, 0, 0)),
    (64, 48, 96, 112, 128, 80, 1, (16, 48, 64)),
    (48, 32, 80, 96, 80, 64, 3, (0, 0, 0)),
    (48, 32, 80, 96, 80, 64, 3, (32, 16, 16)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("algo", [None, "best", "proposal"])
@pytest.mark.parametrize("case", CASES)
def test_matmul_i8_tn_exact(cp, algo, case):
    m, n, k, lda, ldb, ldc, batch, offsets = case
    rng = np.random.default_rng(1234 + batch + sum(offsets))
    a, b = _planes(rng, batch, m, lda, k), _planes(rng, batch, n, ldb, k)
    c_shape = (batch, n, ldc)
    da, db, dc, (pa, pb, pc) = _device_buffers(cp, a, b, c_shape, offsets)
    strides = (m * lda, n * ldb, n * ldc) if batch > 1 else (0, 0, 0)
    if algo == "proposal":
        s = cublaslt.shape(m, n, k, lda, ldb, ldc, batch, *strides, pa, pb, pc)
        props = cublaslt.heuristics(
            m, n, k, lda, ldb, ldc, batch, *strides, align_a=s.align_a, align_b=s.align_b, align_c=s.align_c
        )
        chosen = props[-1]  # the heuristic's last proposal: a different kernel from the default
    else:
        chosen = algo
    cublaslt.matmul_i8_tn(m, n, k, pa, lda, pb, ldb, pc, ldc, batch, *strides, algo=chosen)
    cp.cuda.get_current_stream().synchronize()
    got = _read_c(cp, dc, offsets[2], c_shape, m)
    np.testing.assert_array_equal(got.astype(np.int64), _reference(a, b, k, m, n))
    # C's padding rows are not written
    flat = cp.asnumpy(dc[offsets[2] // 4 :]).reshape(c_shape)
    assert (flat[:, :, m:] == -1).all()


@pytest.mark.gpu
def test_every_proposal_is_exact(cp):
    m, n, k, lda, ldb, ldc = 64, 48, 96, 96, 96, 64
    rng = np.random.default_rng(7)
    a, b = _planes(rng, 1, m, lda, k), _planes(rng, 1, n, ldb, k)
    da, db, dc, (pa, pb, pc) = _device_buffers(cp, a, b, (1, n, ldc), (0, 0, 0))
    ref = _reference(a, b, k, m, n)
    props = cublaslt.heuristics(m, n, k, lda, ldb, ldc)
    assert props and all(p.state == 0 and p.workspace <= cublaslt.WORKSPACE_BYTES for p in props)
    for p in props:
        dc.fill(-1)
        cublaslt.matmul_i8_tn(m, n, k, pa, lda, pb, ldb, pc, ldc, algo=p)
        cp.cuda.get_current_stream().synchronize()
        np.testing.assert_array_equal(
            _read_c(cp, dc, 0, (1, n, ldc), m).astype(np.int64), ref, err_msg=f"proposal {p.index}"
        )


@pytest.mark.gpu
def test_best_algo_is_cached_and_timed(cp):
    args = (32, 32, 64, 64, 64, 32)
    first = cublaslt.best_algo(*args, reps=2, warmups=1)
    assert cublaslt.best_algo(*args) is first
    rows = [v for (dev, s), v in cublaslt.tuned().items() if s[:6] == args and s.batch == 1]
    assert rows and any(t is not None and t > 0 for _, t in rows[0])


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES)
def test_gemm_i8_strided_batched_exact(cp, case):
    from emublas._kernels import cublas_ext

    m, n, k, lda, ldb, ldc, batch, offsets = case
    rng = np.random.default_rng(99 + batch)
    a, b = _planes(rng, batch, m, lda, k), _planes(rng, batch, n, ldb, k)
    c_shape = (batch, n, ldc)
    da, db, dc, (pa, pb, pc) = _device_buffers(cp, a, b, c_shape, offsets)
    cublas_ext.gemm_i8_strided_batched(
        cp.cuda.device.get_cublas_handle(),
        cp.cuda.get_current_stream().ptr,
        1,
        0,
        m,
        n,
        k,
        pa,
        lda,
        m * lda,
        pb,
        ldb,
        n * ldb,
        pc,
        ldc,
        n * ldc,
        batch,
    )
    cp.cuda.get_current_stream().synchronize()
    got = _read_c(cp, dc, offsets[2], c_shape, m)
    np.testing.assert_array_equal(got.astype(np.int64), _reference(a, b, k, m, n))


@pytest.mark.gpu
def test_captured_best_call_replays_exactly(cp):
    """A never-timed shape under capture: the heuristic's first algorithm, no sync, replay exact."""
    m, n, k, lda, ldb, ldc, batch = 48, 64, 112, 112, 112, 48, 2
    rng = np.random.default_rng(5)
    a, b = _planes(rng, batch, m, lda, k), _planes(rng, batch, n, ldb, k)
    c_shape = (batch, n, ldc)
    da, db, dc, (pa, pb, pc) = _device_buffers(cp, a, b, c_shape, (0, 0, 0))
    cp.cuda.Device().synchronize()  # the copies are done before the non-blocking stream reads them
    stream = cp.cuda.Stream(non_blocking=True)
    if not hasattr(stream, "begin_capture"):
        pytest.skip("this cupy cannot capture CUDA graphs")
    strides = (m * lda, n * ldb, n * ldc)
    cublaslt.handle()  # handle and the stream's workspace exist before capture, as after any warm-up call
    cublaslt.workspace(stream=stream.ptr)
    before = len(cublaslt.tuned())
    with stream:
        stream.begin_capture()
        cublaslt.matmul_i8_tn(m, n, k, pa, lda, pb, ldb, pc, ldc, batch, *strides, stream=stream.ptr, algo="best")
        graph = stream.end_capture()
    assert len(cublaslt.tuned()) == before  # nothing was timed while capturing
    with stream:  # on the replay's stream: a non-blocking stream does not wait for the null stream's fill
        dc.fill(-1)
        graph.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(_read_c(cp, dc, 0, c_shape, m).astype(np.int64), _reference(a, b, k, m, n))
