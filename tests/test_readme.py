"""Every ```python block of README.md runs as written, in order, in one namespace
(later blocks use the names earlier ones define, as a reader would); blocks
that need cupy or a GPU run only where cupy sees one."""

import pathlib
import re
import warnings

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def _gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 2


def test_every_readme_python_block_runs(capsys):
    import emublas

    namespace: dict = {}
    ran = 0
    for i, block in enumerate(BLOCKS):
        if "cupy" in block and not _gpu():
            continue
        code = compile(block, f"README.md python block {i + 1}", "exec")
        with warnings.catch_warnings():
            # the blocks show calls, not accuracy: ozaki2's accuracy warning (if any) is not this test's subject
            warnings.simplefilter("ignore", emublas.OzakiAccuracyWarning)
            exec(code, namespace)
        ran += 1
    emublas.set_backend(None)  # the first block ends with a process-wide set_backend
    assert ran >= 2 and "c" in namespace and "exact" in namespace
    assert (namespace["exact"] == namespace["ia"] @ namespace["ib"]).all()


def test_readme_two_commands_are_the_documented_ones():
    text = README.read_text()
    assert "python3 -m pip install -e '.[test]' && python3 -m pytest -q" in text
    assert "python3 -m pip install -e '.[plot]' && python3 -m emublas sweep --quick --out sweep-out" in text
