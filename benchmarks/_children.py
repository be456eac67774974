"""The benchmarks' child processes: a script run again with ``--child``, answering in JSON.

A fresh process per measurement keeps one run's caches, pools and imports out of the
next; the child prints one JSON line last, which the parent reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["run_json_child"]

ROOT = Path(__file__).resolve().parent.parent


def run_json_child(
    script: str, child: str, program_args: list[str], backend: str, timeout: float = 600, env: dict | None = None
) -> Any:
    """Run ``python3 SCRIPT --child CHILD -- PROGRAM_ARGS`` and return its last stdout line, parsed.

    Parameters
    ----------
    script : str
        The benchmark script (its ``__file__``).
    child : str
        The script's ``--child`` value.
    program_args : list of str
        Arguments after ``--``.
    backend : str
        ``EMUBLAS_BACKEND`` of the child; the shim's ``EMUBLAS_INTERPOSE`` and
        ``EMUBLAS_VERBOSE`` are cleared, so the child sets up what it measures itself.
    timeout : float, optional
        Seconds.
    env : dict, optional
        More environment variables for the child.

    Returns
    -------
    object
        The child's JSON answer.

    Raises
    ------
    RuntimeError
        The child failed; the message ends with its stderr.
    """
    more = env or {}
    env = {k: v for k, v in os.environ.items() if k not in ("EMUBLAS_INTERPOSE", "EMUBLAS_VERBOSE")}
    env.update(more, EMUBLAS_BACKEND=backend)
    proc = subprocess.run(
        [sys.executable, script, "--child", child, "--", *program_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {child} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
