"""Source of the start-up hook ``emublas-interpose.pth`` (regenerate: ``python3 interpose/startup_hook.py``).

site.py executes ``import`` lines of ``.pth`` files at interpreter start, before
all site directories are on ``sys.path``, so the hook imports nothing itself:
with ``EMUBLAS_INTERPOSE`` set it runs the code of ``import_hook.py`` (pasted
into the line) and arms its finder, which installs the shim right after the
program imports ``scipy.linalg.blas`` or ``cupy`` (by then every path is in
place, and a program that uses neither pays nothing).  With the variable unset,
empty or 0/false/no/off, the line reads one environment variable and does
nothing else.
"""

import ast
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OFF = ("", "0", "false", "no", "off")


def hook_code() -> str:
    """The code the ``.pth`` line runs: ``import_hook.py`` without its docstring, then ``arm_startup()``.

    Returns
    -------
    str
        Python source, executed with ``exec`` at interpreter start.
    """
    with open(os.path.join(HERE, "import_hook.py")) as fh:
        source = fh.read()
    first = ast.parse(source).body[0]
    lines = source.splitlines(keepends=True)
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):  # the module docstring
        lines = lines[first.end_lineno :]
    return "".join(lines).lstrip("\n") + "\n\narm_startup()\n"


def pth_text() -> str:
    """The two lines of ``emublas-interpose.pth``.

    Returns
    -------
    str
        A comment line, then the ``import`` line ``site.py`` executes.
    """
    return (
        "# emublas: with EMUBLAS_INTERPOSE set (not empty, 0, false, no, off) the emublas.interpose shim is"
        " installed when the program imports scipy.linalg.blas or cupy; otherwise nothing is imported.\n"
        f"import os; os.environ.get('EMUBLAS_INTERPOSE', '').strip().lower() in {OFF!r}"
        f" or exec({hook_code()!r}, {{}})\n"
    )


if __name__ == "__main__":
    with open(os.path.join(HERE, "emublas-interpose.pth"), "w") as fh:
        fh.write(pth_text())
