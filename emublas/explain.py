"""``emublas.explain``: where ``backend="auto"`` would send a call, and why, without running it."""

from __future__ import annotations

import inspect
from typing import Any, cast

from . import config
from ._arrays import is_cupy

__all__ = ["explain", "auto_last", "format_decision"]


def auto_last() -> dict | None:
    """What the last ``auto`` call of this thread chose.

    Returns
    -------
    dict or None
        Routine, shape, requirement, table, every candidate's predicted time
        and accuracy verdict, the chosen backend and options, and the reason;
        None before the first call.
    """
    from .backends.auto.backend import last_run

    return last_run()


def _dims(kind: str, p: dict) -> tuple[int, int, int]:
    import numpy as np

    shape = lambda x: tuple(getattr(x, "shape", None) or np.shape(x)) or (1, 1)  # noqa: E731
    two = lambda x: shape(x) if len(shape(x)) == 2 else (shape(x)[0], 1)  # noqa: E731
    if kind == "gemm":
        ra, ca = two(p["a"])
        rb, cb = two(p["b"])
        m, k = (ca, ra) if int(p.get("trans_a", 0)) else (ra, ca)
        n = rb if int(p.get("trans_b", 0)) else cb
        return m, n, k
    if kind in ("syrk", "herk", "syr2k", "her2k"):
        r, c = two(p["a"])
        n, k = (c, r) if int(p.get("trans", 0)) else (r, c)
        return n, n, k
    m, n = two(p["b"])
    return m, n, (n if int(p.get("side", 0)) else m)


def explain(routine_name: str, *args: Any, **kw: Any) -> dict:
    """The decision ``backend="auto"`` makes for ``routine(*args, **kw)``, without computing.

    Parameters
    ----------
    routine_name : str
        A prefixed routine name, e.g. ``"zgemm"``, ``"dsyrk"``, ``"ztrsm"``.
    *args, **kw
        The routine's arguments (arrays or anything with a ``shape``); auto's options
        (``accuracy``, ``bits``, ``table``) may be given too, otherwise the selection's
        and the environment's apply.

    Returns
    -------
    dict
        routine, m, n, k, device, requirement, table, backend, options, reason and the
        candidates (each with its predicted ratio to native, predicted seconds, and the
        accuracy verdict).

    Raises
    ------
    ValueError
        Unknown routine name, or a bad ``accuracy``/``bits``/``table`` option.
    TypeError
        Arguments that do not fit the routine's signature.

    Examples
    --------
    >>> import numpy as np, emublas
    >>> a = np.ones((8, 8))
    >>> emublas.explain("dgemm", 1.0, a, a)["backend"]
    'native'
    """
    from .blas import ROUTINES

    name = str(routine_name).strip().lower()
    if name not in ROUTINES or name[0] not in "sdcz":
        valid = ", ".join(sorted(r for r in ROUTINES if r[0] in "sdcz"))
        raise ValueError(f"explain: unknown routine {routine_name!r}; valid: {valid}")
    prefix, kind = name[0], name[1:]
    auto_opts: dict[str, Any] = {key: kw.pop(key) for key in ("accuracy", "bits", "table") if key in kw}
    kw.pop("backend", None)
    bound = inspect.signature(ROUTINES[name]).bind(*args, **kw)
    m, n, k = _dims(kind, bound.arguments)
    be, opts = config.resolve("auto", auto_opts)
    device = "gpu" if any(is_cupy(v) for v in bound.arguments.values()) else "cpu"
    if kind in ("herk", "her2k") and prefix in "sd":
        kind = kind.replace("he", "sy")
    if kind == "hemm" and prefix in "sd":
        kind = "symm"
    # resolve("auto") gives the auto backend; decide() is its own, not part of the shared protocol
    decision = cast(Any, be).decide(
        kind, prefix, m, n, k, device, accuracy=opts["accuracy"], bits=opts["bits"], table=opts["table"]
    )
    return decision.as_dict()


def format_decision(d: dict) -> str:
    """A decision record as readable lines.

    Parameters
    ----------
    d : dict
        What :func:`explain` or :func:`auto_last` returned.

    Returns
    -------
    str
        The choice and its reason, then one line per candidate (``+`` for those
        that meet the requirement).
    """
    lines = [
        f"{d['routine']} {d['m']}x{d['n']}x{d['k']} on the {d['device'].upper()}: {d['backend']}"
        + (f" ({', '.join(f'{k}={v}' for k, v in d['options'].items())})" if d["options"] else ""),
        f"  requirement: {d['requirement']}",
        f"  table: {d['table']}",
        f"  reason: {d['reason']}",
    ]
    for c in d["candidates"]:
        opts = ",".join(f"{k}={v}" for k, v in c["options"].items())
        t = (
            "unmeasured"
            if c["predicted_s"] is None
            else f"{c['predicted_s'] * 1e3:.3f} ms ({c['predicted_ratio']:.2f}x native)"
        )
        lines.append(
            f"  {'+' if c['qualifies'] else '-'} {c['backend']}{'(' + opts + ')' if opts else ''}: {t}; {c['accuracy']}"
        )
    return "\n".join(lines)
