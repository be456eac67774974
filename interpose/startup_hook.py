"""Source of the start-up hook ``emublas-interpose.pth`` (regenerate: ``python3 interpose/startup_hook.py``).

site.py executes ``import`` lines of ``.pth`` files at interpreter start, before
all site directories are on ``sys.path``, so the hook imports nothing itself:
with ``EMUBLAS_INTERPOSE`` set it only puts a finder on ``sys.meta_path`` that
installs the shim right after the program imports ``scipy.linalg.blas`` or
``cupy`` (by then every path is in place, and a program that uses neither pays
nothing).  With the variable unset, empty or 0/false/no/off, the line reads one
environment variable and does nothing else.
"""
import os

HOOK = r'''
import sys


class _EmublasInterpose:
    triggers = ("scipy.linalg.blas", "cupy")

    def find_spec(self, name, path, target=None):
        if name not in self.triggers:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                continue
            run = spec.loader.exec_module

            def exec_module(module, run=run, hook=self):
                run(module)
                if hook in sys.meta_path:
                    sys.meta_path.remove(hook)
                try:
                    __import__("emublas.interpose", fromlist=["install"]).install()
                except Exception as exc:
                    print(f"emublas: EMUBLAS_INTERPOSE is set but the shim was not installed"
                          f" ({type(exc).__name__}: {exc}); for the traceback run:"
                          f" python -c \"import emublas.interpose as s; s.install()\"", file=sys.stderr)

            spec.loader.exec_module = exec_module
            return spec
        return None


if not any(type(f).__name__ == "_EmublasInterpose" for f in sys.meta_path):  # .pth files may run twice
    sys.meta_path.insert(0, _EmublasInterpose())
'''

OFF = ("", "0", "false", "no", "off")


def pth_text() -> str:
    """The two lines of ``emublas-interpose.pth``."""
    return ("# emublas: with EMUBLAS_INTERPOSE set (not empty, 0, false, no, off) the emublas.interpose shim is"
            " installed when the program imports scipy.linalg.blas or cupy; otherwise nothing is imported.\n"
            f"import os; os.environ.get('EMUBLAS_INTERPOSE', '').strip().lower() in {OFF!r}"
            f" or exec({HOOK!r}, {{}})\n")


if __name__ == "__main__":
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "emublas-interpose.pth"), "w") as fh:
        fh.write(pth_text())
