"""scipy's own level-3 BLAS tests, run unchanged with the shim switched on by environment.

A subprocess runs the installed ``scipy/linalg/tests/test_blas.py`` (gemm,
syrk, syr2k, herk, her2k, symm, hemm, trmm, trsm and get_blas_funcs tests) with the same interpreter and

    EMUBLAS_INTERPOSE=1  EMUBLAS_BACKEND=<backend>  EMUBLAS_MIN_DIM=0

so the ``.pth`` hook installed with the package (``pip install [-e] .``)
installs the shim at start-up and even scipy's tiny matrices are emulated.  A
small pytest plugin (written to a temp dir on PYTHONPATH, loaded by ``-p``)
saves ``emublas.interpose.stats()`` at the end of the session, so the test
also checks that the calls really went to the backend.

scipy's gemm tests only pass 1-D operands (``f(3, [3], [-4])``), which the shim
leaves to scipy's original; a second check therefore calls all four gemm
routines through ``get_blas_funcs`` on 2-D operands in the same environment.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

scipy_linalg = pytest.importorskip("scipy.linalg")

BACKENDS = ["ozaki2", "strassen"]
SCIPY_TESTS = Path(scipy_linalg.__file__).parent / "tests" / "test_blas.py"
SELECTION = "FBLAS3Simple or BLAS3Syrk or BLAS3Syr2k or SyHe or get_blas_funcs or BLAS3Symm or TRMM or test_trsm"
PTH = "emublas-interpose.pth"
HOOK_ERROR = "EMUBLAS_INTERPOSE is set but the shim was not installed"
# Routines scipy's selected tests call with 2-D operands (all of them must be emulated).
EMULATED = [p + r for r in ("syrk", "syr2k", "symm", "trmm", "trsm") for p in "sdcz"] + [
    "cherk",
    "zherk",
    "cher2k",
    "zher2k",
    "chemm",
    "zhemm",
]

PLUGIN = """
import json, os, sys

def pytest_sessionfinish(session, exitstatus):
    shim = sys.modules.get("emublas.interpose")
    with open(os.environ["EMUBLAS_TEST_STATS_OUT"], "w") as out:
        json.dump({"installed": bool(shim and shim.installed()), "stats": shim.stats() if shim else {}}, out)
"""

GEMM_CHECK = """
import json
import numpy as np
import emublas.interpose as shim
from scipy.linalg import get_blas_funcs

rng = np.random.default_rng(7)
errors = {}
for dtype in (np.float32, np.float64, np.complex64, np.complex128):
    a = rng.standard_normal((6, 5)) + (1j * rng.standard_normal((6, 5)) if np.dtype(dtype).kind == "c" else 0)
    b = rng.standard_normal((5, 4)) + (1j * rng.standard_normal((5, 4)) if np.dtype(dtype).kind == "c" else 0)
    a, b = a.astype(dtype), b.astype(dtype)
    c = get_blas_funcs("gemm", (a, b))(2.0, a, b)
    ref = 2.0 * (a.astype(np.complex128) @ b.astype(np.complex128))
    errors[np.dtype(dtype).char] = float(np.max(np.abs(c - ref)) / np.max(np.abs(ref)))
print(json.dumps({"installed": shim.installed(), "stats": shim.stats(), "errors": errors}))
"""


def _hook_installed() -> bool:
    dirs = list(site.getsitepackages()) + [site.getusersitepackages()]
    return any(Path(d, PTH).is_file() for d in dirs)


def _env(backend: str, plugin_dir: Path, stats_out: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMUBLAS_")}  # EMUBLAS_VERBOSE unset, too
    env.update(
        EMUBLAS_INTERPOSE="1",
        EMUBLAS_BACKEND=backend,
        EMUBLAS_MIN_DIM="0",
        EMUBLAS_TEST_STATS_OUT=str(stats_out),
        EMUBLAS_STRASSEN_LEVELS="1",
    )  # scipy's matrices are tiny: force one Strassen level
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugin_dir), os.environ.get("PYTHONPATH")]))
    return env


@pytest.fixture
def setup(tmp_path):
    if not SCIPY_TESTS.is_file():
        pytest.skip(f"scipy's tests are not installed ({SCIPY_TESTS} missing)")
    if not _hook_installed():
        pytest.fail(
            f"{PTH} is not installed for {sys.executable}: reinstall the package "
            "(pip install -e .) so that EMUBLAS_INTERPOSE=1 works at start-up"
        )
    (tmp_path / "_emublas_stats_plugin.py").write_text(textwrap.dedent(PLUGIN))
    return tmp_path


@pytest.mark.parametrize("backend", BACKENDS)
def test_scipy_blas3_suite_under_shim(setup, backend):
    stats_out = setup / "stats.json"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "_emublas_stats_plugin",
        str(SCIPY_TESTS),
        "-k",
        SELECTION,
    ]
    done = subprocess.run(
        cmd, cwd=setup, env=_env(backend, setup, stats_out), capture_output=True, text=True, timeout=300
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"scipy's BLAS-3 tests fail under the shim ({backend}):\n{output[-6000:]}"
    assert HOOK_ERROR not in output, output[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]

    report = json.loads(stats_out.read_text())
    assert report["installed"], "the shim was not active in the scipy test run (the .pth hook did not install it)"
    stats = report["stats"]
    missing = [name for name in EMULATED if stats.get(f"{name}:emulated", 0) == 0]
    assert not missing, f"not emulated on {backend}: {missing}; stats: {stats}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_gemm_through_get_blas_funcs_under_shim(setup, backend):
    done = subprocess.run(
        [sys.executable, "-c", GEMM_CHECK],
        cwd=setup,
        env=_env(backend, setup, setup / "unused"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stderr == "", done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["installed"]
    for p in "sdcz":
        assert report["stats"].get(f"{p}gemm:emulated") == 1, report["stats"]
    tolerance = {"f": 1e-5, "F": 1e-5, "d": 1e-13, "D": 1e-13}
    bad = {k: v for k, v in report["errors"].items() if v > tolerance[k]}
    assert not bad, f"relative errors of emulated gemm on {backend}: {report['errors']}"


STATS_CHECK = """
import json
import numpy as np
import emublas, emublas.interpose as shim
from scipy import stats

rng = np.random.default_rng(3)
p = 70
g = rng.standard_normal((p, p))
cov = g @ g.T / p + 0.1 * np.eye(p)
x = rng.standard_normal((5, p))
w = stats.invwishart(df=p + 5, scale=cov).rvs(size=3, random_state=np.random.default_rng(2))

def run():
    mvn = stats.multivariate_normal(mean=np.zeros(p), cov=cov)
    iw = stats.invwishart(df=p + 5, scale=cov)
    return {"mvn_logpdf": mvn.logpdf(x).tolist(),
            "mvn_rvs": mvn.rvs(size=4, random_state=np.random.default_rng(5)).ravel().tolist(),
            "iw_logpdf": np.atleast_1d(iw.logpdf(np.moveaxis(w, 0, -1))).tolist(),
            "iw_rvs": iw.rvs(size=2, random_state=np.random.default_rng(6)).ravel().tolist()}

emulated = run()
counts = shim.stats()
with emublas.use("native"):
    native = run()
print(json.dumps({"installed": shim.installed(), "stats": counts, "emulated": emulated, "native": native}))
"""


def test_scipy_stats_under_shim_equal_native(setup):
    """multivariate_normal logpdf/rvs, and invwishart's (whose logpdf and rvs call trsm and
    trmm through get_blas_funcs), under the shim with ozaki2 equal native within their accuracy."""
    done = subprocess.run(
        [sys.executable, "-c", STATS_CHECK],
        cwd=setup,
        env=_env("ozaki2", setup, setup / "unused"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["installed"]
    for name in ("dtrsm", "dtrmm"):
        assert report["stats"].get(f"{name}:emulated", 0) > 0, report["stats"]
    for key, ref in report["native"].items():
        got, ref = np.asarray(report["emulated"][key]), np.asarray(ref)
        scale = np.abs(ref).max()
        assert np.abs(got - ref).max() <= 1e-10 * scale, (key, np.abs(got - ref).max(), scale)
