"""``emublas.info()``: what is installed, what can run here, what is selected."""

from __future__ import annotations

import platform
from typing import Any

from . import backends as _registry
from ._hardware import cpu_model
from ._version import __version__
from .config import get_backend, resolve

__all__ = ["info", "format_info", "cpu_model", "gpu_devices"]


def _extension() -> dict[str, Any]:
    from ._kernels import cpu

    built = cpu.available()
    out: dict[str, Any] = {"built": built}
    if built:
        out["features"] = cpu.features()
        out["threads"] = cpu.default_threads()
        # of those, the ones a kernel started now would use (other runnable threads hold the rest)
        out["threads_free"] = cpu.pool_team(out["threads"])
        from .backends.ozaki2.kernels_cpu import oz_kernel_name

        # what runs here, by name: the feature flags alone do not say which kernel a CPU gets
        out["kernels"] = {"int8_gemm": cpu.kernel_name(), "ozaki2_passes": oz_kernel_name()}
    else:
        out["error"] = cpu.load_error()
    return out


def gpu_devices() -> dict[str, Any]:
    """cupy's version and the GPUs it sees, or why there are none.

    Returns
    -------
    dict
        ``cupy`` (version or None), ``devices`` (a list of dicts: id, name,
        compute_capability as ``"major.minor"``, memory_gib) and, where cupy or
        the driver fails, ``detail`` (why, in one line).
    """
    try:
        import cupy
    except Exception as exc:
        return {"cupy": None, "devices": [], "detail": f"cupy not importable ({type(exc).__name__})"}
    out: dict[str, Any] = {"cupy": cupy.__version__, "devices": []}
    try:
        for i in range(cupy.cuda.runtime.getDeviceCount()):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            out["devices"].append(
                {
                    "id": i,
                    "name": name,
                    "compute_capability": f"{props['major']}.{props['minor']}",
                    "memory_gib": round(props["totalGlobalMem"] / 2**30, 1),
                }
            )
    except Exception as exc:  # no driver / no device: report it
        out["detail"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return out


def info() -> dict[str, Any]:
    """Report version, backends and their readiness, hardware, and the active selection.

    Returns
    -------
    dict
        ``version``; ``cpu`` (model, C extension built, SIMD features used,
        threads, and how many of them a kernel started now would get:
        ``threads_free``); ``gpu`` (cupy version, devices with compute capability);
        ``backends`` (per backend: description, options with their
        environment variables, ``cpu``/``gpu`` readiness); ``selection``
        (backend, options, and where the choice came from) or ``selection_error``
        when the environment holds an invalid choice.
    """
    import numpy
    import scipy

    report: dict[str, Any] = {
        "version": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "cpu": {"model": cpu_model(), "extension": _extension()},
        "gpu": gpu_devices(),
        "backends": {},
    }
    for name in _registry.names():
        try:
            be = _registry.get(name)
        except Exception as exc:  # a broken plug-in must not hide the others
            report["backends"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        ready = be.readiness()
        report["backends"][name] = {
            "description": be.description,
            "options": {
                k: {"default": o.default, "shown": o.default_text, "env": o.env_var, "doc": o.doc}
                for k, o in be.options.items()
            },
            "cpu": {"usable": ready["cpu"][0], "detail": ready["cpu"][1]},
            "gpu": {"usable": ready["gpu"][0], "detail": ready["gpu"][1]},
        }
    report["auto_tables"] = _auto_tables()
    try:
        sel = get_backend()
        resolve()  # validates the chosen backend's option variables too (EMUBLAS_MODULI=abc)
        report["selection"] = {"backend": sel.backend, "options": dict(sel.options), "source": sel.source}
    except ValueError as exc:
        report["selection_error"] = str(exc)
    return report


def _auto_tables() -> dict[str, str]:
    """The cost table backend='auto' uses per device (path, or "shipped default for ...")."""
    from .backends.auto import tables

    out = {}
    for device in ("cpu", "gpu"):
        try:
            out[device] = tables.table_for(device).label
        except ValueError as exc:
            out[device] = f"unusable: {exc}"
    return out


def format_info(report: dict[str, Any] | None = None) -> str:
    """``info()`` as readable text (what ``emublas info`` prints).

    Parameters
    ----------
    report : dict, optional
        A report from :func:`info`; None: a new one.

    Returns
    -------
    str
        Several lines: versions, CPU and C extension, GPUs, backends and their
        readiness, the active selection.
    """
    r = info() if report is None else report
    ext = r["cpu"]["extension"]
    lines = [
        f"emublas {r['version']}  (Python {r['python']}, numpy {r['numpy']}, scipy {r['scipy']})",
        f"CPU: {r['cpu']['model']}",
    ]
    if ext["built"]:
        feats = ", ".join(k for k, v in ext["features"].items() if v) or "baseline ISA only"
        kern = ext["kernels"]
        lines.append(
            f"  C extension: built; SIMD used: {feats}; threads: {ext['threads']} ({ext['threads_free']} free now);"
            f" kernels: int8 GEMM {kern['int8_gemm']}, ozaki2 passes {kern['ozaki2_passes']}"
        )
    else:
        lines.append(f"  C extension: NOT built ({ext['error']})")
    g = r["gpu"]
    if g["devices"]:
        for d in g["devices"]:
            lines.append(
                f"GPU {d['id']}: {d['name']}, compute capability {d['compute_capability']},"
                f" {d['memory_gib']} GiB (cupy {g['cupy']})"
            )
    else:
        lines.append(f"GPU: none ({g.get('detail') or 'no device'})")
    lines.append("backends:")
    for name, b in r["backends"].items():
        if "error" in b:
            lines.append(f"  {name:9s} ERROR {b['error']}")
            continue
        state = lambda d, b=b: "yes" if b[d]["usable"] else "no"  # noqa: E731
        lines.append(f"  {name:9s} cpu: {state('cpu'):3s} gpu: {state('gpu'):3s} {b['description']}")
        for side in ("cpu", "gpu"):
            if not b[side]["usable"]:
                lines.append(f"  {'':9s} {side}: {b[side]['detail']}")
        for opt, o in b["options"].items():
            lines.append(f"  {'':9s} option {opt} = {o['shown']} by default, ${o['env']}: {o['doc']}")
    if "auto_tables" in r:
        lines.append("auto cost tables: " + "; ".join(f"{d}: {t}" for d, t in r["auto_tables"].items()))
    if "selection" in r:
        s = r["selection"]
        opts = ", ".join(f"{k}={v}" for k, v in s["options"].items())
        lines.append(f"selected: {s['backend']}" + (f" ({opts})" if opts else "") + f"  [from {s['source']}]")
    else:
        lines.append(f"selected: INVALID: {r['selection_error']}")
    return "\n".join(lines)
