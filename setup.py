"""Build hooks that pyproject.toml cannot express.

All metadata lives in pyproject.toml.  This file adds two things:

* the cffi builder (out-of-line API mode), so that ``pip install .`` compiles
  ``native/cpu``;
* the start-up hook ``interpose/emublas-interpose.pth``, which must land in the
  root of site-packages (site.py runs ``import`` lines of ``*.pth`` files found
  there; with ``EMUBLAS_INTERPOSE`` unset the hook imports nothing).
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = os.path.join("interpose", "emublas-interpose.pth")
CUDA_DIR = os.path.join("native", "cuda")
INCLUDE_DIR = os.path.join("native", "include")  # headers shared by the C and CUDA sources


class build_py_with_pth(build_py):
    """``build_py`` that also ships the ``.pth`` hook at the top of the install.

    * Regular wheel (``pip install .``): copied to the root of ``build_lib``,
      whose tree becomes the wheel's root, i.e. site-packages.
    * Editable wheel (``pip install -e .``, setuptools >= 64, PEP 660): here
      ``build_py`` runs with ``editable_mode = True`` and ``build_lib`` is a
      scratch folder that the editable wheel does not ship (its default
      "lenient" mode ships only a path finder and its own ``.pth``).  What
      editable_wheel does ship is the folder it points the ``install``
      command's ``install_lib`` at (the unpacked editable wheel, see
      setuptools.command.editable_wheel._configure_build), so the hook is
      copied there.  It is a copy: edits to interpose/emublas-interpose.pth
      need a reinstall, unlike the modules.
    """

    def run(self):
        super().run()
        if self.editable_mode:
            target = self.get_finalized_command("install").install_lib
        else:
            target = self.build_lib
            # CUDA sources, compiled at run time by cupy (an editable install reads native/cuda)
            dest = os.path.join(self.build_lib, "emublas", "_kernels", "cuda")
            self.mkpath(dest)
            for name in sorted(os.listdir(CUDA_DIR)):
                if name.endswith((".cu", ".cuh")):
                    self.copy_file(os.path.join(CUDA_DIR, name), os.path.join(dest, name), preserve_mode=False)
            dest = os.path.join(self.build_lib, "emublas", "_kernels", "include")
            self.mkpath(dest)
            for name in sorted(os.listdir(INCLUDE_DIR)):
                if name.endswith(".h"):
                    self.copy_file(os.path.join(INCLUDE_DIR, name), os.path.join(dest, name), preserve_mode=False)
        self.copy_file(PTH, os.path.join(target, os.path.basename(PTH)), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if not self.editable_mode:
            outputs.append(os.path.join(self.build_lib, os.path.basename(PTH)))
        return outputs

    def find_data_files(self, package, src_dir):
        # MANIFEST.in puts the hook in the sdist; it is not package data of emublas.interpose.
        files = super().find_data_files(package, src_dir)
        return [f for f in files if os.path.basename(f) != os.path.basename(PTH)]


setup(
    cffi_modules=["native/build.py:ffibuilder"],
    cmdclass={"build_py": build_py_with_pth},
)
