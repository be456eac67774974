"""The interpose shim's one import hook: run a callback right after the program imports a module.

Two users: the start-up hook ``emublas-interpose.pth`` (installs the shim once
the program imports ``scipy.linalg.blas`` or ``cupy``) and the cupy part
(swaps cupy's entry points once the program imports cupy after the shim was
installed).  site.py runs the ``.pth`` line before every site directory is on
``sys.path``, so ``startup_hook.py`` pastes this file's code into that line:
it must import nothing but ``sys`` and stay valid when run with ``exec``.
"""

import sys


class AfterImport:
    """A ``sys.meta_path`` finder that calls ``callback(module)`` right after the
    first of ``triggers`` has been executed, then leaves ``sys.meta_path``.

    The module is found by the other finders and loaded by its own loader; only
    the loader's ``exec_module`` is wrapped.  ``name`` tells hooks apart (a
    ``.pth`` file may run twice).  A hook asked again while it is asking the
    other finders answers None, so that two such hooks (an older copy of the
    ``.pth`` file in a parent environment, say) do not ask each other forever.

    Parameters
    ----------
    triggers : iterable of str
        Full module names whose import fires the hook.
    callback : callable
        Called with the module object once it has executed.
    name : str
        The hook's name.
    """

    def __init__(self, triggers, callback, name):
        self.triggers = tuple(triggers)
        self.callback = callback
        self.name = name
        self.searching = False  # the import lock of the module keeps this per import

    def find_spec(self, fullname, path, target=None):
        """The spec of a trigger module, with its loader's ``exec_module`` wrapped to run the callback.

        Parameters
        ----------
        fullname : str
            The module being imported.
        path, target
            As the import system passes them to ``find_spec``.

        Returns
        -------
        importlib.machinery.ModuleSpec or None
            None for other modules (and while this hook asks the other finders).
        """
        if fullname not in self.triggers or self.searching:
            return None
        self.searching = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    continue
                run = spec.loader.exec_module

                def exec_module(module, run=run, hook=self):
                    run(module)
                    hook.disarm()
                    hook.callback(module)

                spec.loader.exec_module = exec_module
                return spec
            return None
        finally:
            self.searching = False

    def arm(self):
        """Put the hook first on ``sys.meta_path`` (once, whatever hook of this name is there)."""
        if not any(
            getattr(f, "name", None) == self.name and isinstance(getattr(f, "triggers", None), tuple)
            for f in sys.meta_path
        ):
            sys.meta_path.insert(0, self)

    def disarm(self):
        """Take the hook off ``sys.meta_path``."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _install_shim(module):
    """The start-up hook's callback: install the shim, or say in one line why not."""
    try:
        __import__("emublas.interpose", fromlist=["install"]).install()
    except Exception as exc:
        print(
            f"emublas: EMUBLAS_INTERPOSE is set but the shim was not installed"
            f" ({type(exc).__name__}: {exc}); for the traceback run:"
            f' python -c "import emublas.interpose as s; s.install()"',
            file=sys.stderr,
        )


def arm_startup():
    """Arm the start-up hook (what the ``.pth`` line runs when ``EMUBLAS_INTERPOSE`` is set)."""
    AfterImport(("scipy.linalg.blas", "cupy"), _install_shim, "emublas-interpose-startup").arm()
