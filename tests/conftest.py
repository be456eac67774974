"""Shared fixtures for the emublas test suite.

* ``xp``      -- the array module under test: ``numpy`` always, ``cupy`` (marked
                 ``gpu``) only where cupy imports and sees at least one CUDA
                 device; otherwise that parameter is skipped with a reason.
* ``seed`` / ``rng`` -- a fresh random seed per test (or the one given in
                 ``EMUBLAS_TEST_SEED``); the seed is attached to the report of
                 every failing test that used it.
* ``emublas`` -- the package, imported lazily so that collection works even
                 while the package is incomplete.

Backends for the parity suite: the default list lives in
``tests/test_blas_parity.py`` (``DEFAULT_BACKENDS``); override it with the
environment variable ``EMUBLAS_TEST_BACKENDS=native,ozaki2`` or the command-line
option ``--emublas-backends=native,ozaki2`` (which sets that variable).
"""

import os
import secrets

import numpy as np
import pytest

BACKENDS_ENV = "EMUBLAS_TEST_BACKENDS"
SEED_ENV = "EMUBLAS_TEST_SEED"


def pytest_addoption(parser):
    group = parser.getgroup("emublas")
    group.addoption(
        "--emublas-backends",
        action="store",
        default=None,
        help=f"comma-separated emublas backends for the parity suite (sets ${BACKENDS_ENV}; default: native)",
    )
    group.addoption(
        "--emublas-seed",
        action="store",
        default=None,
        help=f"fixed random seed for the randomised tests (sets ${SEED_ENV})",
    )


def pytest_configure(config):
    backends = config.getoption("--emublas-backends")
    if backends:
        os.environ[BACKENDS_ENV] = backends
    seed = config.getoption("--emublas-seed")
    if seed:
        os.environ[SEED_ENV] = seed


# --------------------------------------------------------------------------
# array modules
# --------------------------------------------------------------------------

_CUPY_STATE = {}


def cupy_or_skip():
    """Return the cupy module, or skip the current test with the reason."""
    if "module" in _CUPY_STATE:
        return _CUPY_STATE["module"]
    if "reason" in _CUPY_STATE:
        pytest.skip(_CUPY_STATE["reason"])
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install
        _CUPY_STATE["reason"] = f"cupy cannot be imported: {exc!r}"
        pytest.skip(_CUPY_STATE["reason"])
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        _CUPY_STATE["reason"] = f"no usable CUDA device: {exc!r}"
        pytest.skip(_CUPY_STATE["reason"])
    if n == 0:
        _CUPY_STATE["reason"] = "cupy sees no CUDA device"
        pytest.skip(_CUPY_STATE["reason"])
    _CUPY_STATE["module"] = cupy
    return cupy


@pytest.fixture(params=["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    if request.param == "numpy":
        return np
    return cupy_or_skip()


@pytest.fixture
def cupy():
    """cupy itself, for tests that need both array modules at once."""
    return cupy_or_skip()


# --------------------------------------------------------------------------
# the package under test
# --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def emublas():
    import emublas as mod

    return mod


# --------------------------------------------------------------------------
# random numbers with the seed reported on failure
# --------------------------------------------------------------------------


@pytest.fixture
def seed(request):
    env = os.environ.get(SEED_ENV)
    s = int(env) if env else secrets.randbits(63)
    request.node._emublas_seed = s
    return s


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    s = getattr(item, "_emublas_seed", None)
    if rep.failed and s is not None:
        rep.sections.append(("emublas random seed", f"seed={s}  (reproduce with {SEED_ENV}={s} or --emublas-seed={s})"))
