"""The one header of shared constants (native/include/emublas_constants.h) reaches C, CUDA and Python."""

from __future__ import annotations

import re

import pytest

from emublas._kernels import constants, cpu, cuda_source
from emublas.backends.ozaki2 import kernels_cpu, scaling
from emublas.backends.ozaki2 import kernels_gpu as ozaki_gpu


def test_header_values():
    v = constants.read_header()
    assert v["EMUBLAS_OZ_MAX_MODULI"] == 64
    assert v["EMUBLAS_OZ_PAD"] == 32
    assert v["EMUBLAS_I8GEMM_K_EXACT"] == 2**17
    assert v["EMUBLAS_OZ_K_CHUNK"] == 2**17 - 32
    assert v["EMUBLAS_OZ_K_CHUNK"] % v["EMUBLAS_OZ_PAD"] == 0
    assert v["EMUBLAS_OZ_DEAD"] == -(2**31)
    assert v["EMUBLAS_OZ_MAX_TERMS"] == 1024


@pytest.mark.skipif(not cpu.available(), reason="C extension not built")
def test_header_text_matches_compiled_values():
    from emublas._kernels import _cpu  # type: ignore[attr-defined]

    values = constants.read_header()
    assert values  # the parse found the constants
    for name, value in values.items():
        assert getattr(_cpu.lib, name) == value, name


def test_python_modules_take_the_header_values():
    assert ozaki_gpu.PAD == constants.OZ_PAD
    assert ozaki_gpu.MAX_MODULI == constants.OZ_MAX_MODULI
    assert ozaki_gpu.MAX_TERMS == constants.OZ_MAX_TERMS
    assert scaling.K_CHUNK == constants.OZ_K_CHUNK
    assert scaling.DEAD == constants.OZ_DEAD


def test_read_header_rejects_a_non_integer_expression(tmp_path):
    bad = tmp_path / "h.h"
    bad.write_text("#define EMUBLAS_A 3\n#define EMUBLAS_B (EMUBLAS_A + EMUBLAS_C)\n")
    with pytest.raises(ValueError, match="EMUBLAS_B"):
        constants.read_header(str(bad))
    good = tmp_path / "g.h"
    good.write_text(
        "/* #define EMUBLAS_X 1 */\n#define EMUBLAS_A (1 << 4)\n#define EMUBLAS_B (EMUBLAS_A - 2)\n"
        "#define EMUBLAS_F 0x1p49\n"
    )
    assert constants.read_header(str(good)) == {"EMUBLAS_A": 16, "EMUBLAS_B": 14}


def test_nvrtc_source_has_the_header_pasted_in():
    raw = open(cuda_source.source_path("ozaki2.cu")).read()
    assert '#include "../include/emublas_constants.h"' in raw
    text = cuda_source.source_text("ozaki2.cu")
    assert not re.search(r"^\s*#\s*include", text, re.M)  # NVRTC gets no include to resolve
    assert "EMUBLAS_OZ_MAX_MODULI 64" in text and "pow2mod" in text
    assert "emublas_d2f" in cuda_source.source_text("strassen.cu")  # its float32 helpers
    other = cuda_source.source_text("boolpack.cu")  # its asynchronous-copy helpers
    assert "emublas_cp_async16" in other and not re.search(r"^\s*#\s*include", other, re.M)


@pytest.mark.skipif(not cpu.available(), reason="C extension not built")
def test_cpu_moduli_limit_is_the_compiled_one():
    import numpy as np

    x = np.ones((2, 2))
    with pytest.raises(ValueError, match=f"at most {constants.OZ_MAX_MODULI} moduli"):
        kernels_cpu.oz_residues(x, np.zeros(2, np.int32), 0, [3] * (constants.OZ_MAX_MODULI + 1))
