"""The hot CUDA kernels keep everything in registers and shared memory (needs nvcc, not a GPU).

A kernel that spills, or keeps a per-thread array or struct in local memory, pays in DRAM
traffic on every thread: the final pass once wrote 3.7 GB of local memory at n = 8192 for a
copy of its certificate's arguments, with bit-identical results, so no result test could see
it.  ptxas reports each entry function's stack frame and spills; here they must be zero.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# every kernel of ozaki2.cu a call runs on its main path; the others (the rare fix-up pass,
# the integer Garner path with its digit array, the unused two-product real final pass) may
# use local memory
HOT = (
    "oz_stats_f32",
    "oz_stats_f64",
    "oz_bound_f32",
    "oz_bound_f64",
    "oz_plan",
    "oz_res_real_f32",
    "oz_res_real_f64",
    "oz_res_2m_f32",
    "oz_res_2m_f64",
    "oz_res_3m_f32",
    "oz_res_3m_f64",
    "oz_res_split2m_f32",
    "oz_res_split2m_f64",
    "oz_terms",
    "oz_terms_direct",
    "oz_wmax",
    "oz_crt_final_real",
    "oz_crt_final_cplx",
    "oz_crt_fused_cplx",
    "oz_crt_fused2_cplx",
    "oz_crt_fused1_real",
    "oz_crt_fused1_cplx",
    "oz_crt_fused_tr_real",
    "oz_crt_fused_tr_cplx",
)

_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def _ptxas_report(src: Path, out: Path) -> dict[str, tuple[int, int, int]]:
    """``{kernel: (stack frame, spill stores, spill loads)}`` from ``nvcc -Xptxas -v``."""
    cmd = ["nvcc", "-arch=sm_90", "-std=c++17", "--fmad=false", "-c", str(src), "-o", str(out), "-Xptxas", "-v"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    report: dict[str, tuple[int, int, int]] = {}
    name = None
    for line in res.stderr.splitlines():
        m = _ENTRY.search(line)
        if m:
            name = m.group(1)
            continue
        f = _FRAME.search(line)
        if f and name is not None:
            report[name] = (int(f.group(1)), int(f.group(2)), int(f.group(3)))
            name = None
    return report


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_ozaki2_hot_kernels_use_no_local_memory(tmp_path):
    report = _ptxas_report(ROOT / "native" / "cuda" / "ozaki2.cu", tmp_path / "ozaki2.o")
    missing = [k for k in HOT if k not in report]
    assert not missing, f"ptxas reported no entry for {missing}"
    heavy = {k: report[k] for k in HOT if report[k] != (0, 0, 0)}
    assert not heavy, f"stack frame / spill stores / spill loads in bytes: {heavy}"
