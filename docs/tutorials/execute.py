"""Re-execute the course's notebooks and save them with their outputs, ready to commit.

    python docs/tutorials/execute.py                       # all seven
    python docs/tutorials/execute.py 03_graphs.ipynb       # one

Each runs in a fresh kernel in a temporary directory (as tests/test_notebooks.py runs them),
then is written back with its outputs and without volatile metadata: no execution timestamps,
notebook metadata reduced to the kernel and the language. Needs the ``course`` extra.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
KEPT_METADATA = ("kernelspec", "language_info")


def execute(path: Path, timeout: int = 300) -> float:
    """Run ``path`` top to bottom, save it cleaned; return the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as cwd:
        started = time.perf_counter()
        NotebookClient(
            nb, timeout=timeout, kernel_name="python3", record_timing=False, resources={"metadata": {"path": cwd}}
        ).execute()
        seconds = time.perf_counter() - started
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEPT_METADATA}
    nb.metadata.get("language_info", {}).pop("version", None)  # differs from machine to machine
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return seconds


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(p.name for p in HERE.glob("*.ipynb"))
    for name in names:
        print(f"{name}: {execute(HERE / name):.1f} s", flush=True)
