"""Writing an exported directory: all of it, or nothing.

Like ``protoc``'s output, a directory the user names is never left half-written: every file
goes to a fresh temporary directory beside the target, which is then renamed into place. An
existing target is refused unless ``force``; with ``force`` it is swapped out only once the new
directory is complete, and removed after the swap. ``run.sh`` is made executable.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from fbnops.framework import dtypes

from ._plan import file_dtype

__all__ = ["ExportError", "check_target", "npy_bytes", "write"]


class ExportError(ValueError):
    """A bad export request, naming the ``argument`` (``out_dir``, ``target``, ``fetches``...)."""

    def __init__(self, argument: str, reason: str):
        self.argument, self.reason = argument, reason
        super().__init__(f"{argument}: {reason}")


def check_target(out_dir: Path, force: bool) -> None:
    """Refuse ``out_dir`` before any work: an existing file, or an existing directory without ``force``."""
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise ExportError("out_dir", f"{out_dir} exists and is not a directory")
    if out_dir.exists() and not force:
        raise ExportError("out_dir", f"{out_dir} already exists; pass force=True (--force) to replace it")
    parent = out_dir.parent
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise ExportError("out_dir", f"cannot write in {parent}")


def npy_bytes(value: np.ndarray) -> bytes:
    """``value`` as ``.npy`` bytes, bfloat16 widened to float32 (exact; see ``_plan.file_dtype``)."""
    value = np.ascontiguousarray(value)
    if value.dtype == dtypes.bfloat16:
        value = value.astype(file_dtype(value.dtype))
    buf = io.BytesIO()
    np.save(buf, value, allow_pickle=False)
    return buf.getvalue()


def write(out_dir: Path, files: dict[str, str], arrays: dict[str, np.ndarray], force: bool) -> Path:
    """Write ``files`` (text) and ``arrays`` (``.npy``) under ``out_dir`` atomically; return it."""
    out_dir = Path(out_dir).absolute()
    check_target(out_dir, force)
    for rel in [*files, *arrays]:
        path = Path(rel)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise ExportError("files", f"{rel!r} is not a relative path inside the directory")  # a target's bug
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    old = None
    try:
        for rel, text in files.items():
            _put(tmp / rel, text.encode("utf-8"))
        for rel, value in arrays.items():
            _put(tmp / rel, npy_bytes(value))
        for script in tmp.rglob("*.sh"):
            script.chmod(0o755)
        tmp.chmod(0o755)  # mkdtemp makes it 0700
        (tmp / "outputs").mkdir(exist_ok=True)
        if out_dir.exists():
            if not force:  # created meanwhile
                raise ExportError("out_dir", f"{out_dir} already exists; pass force=True (--force) to replace it")
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
            os.rename(out_dir, old / "dir")
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out_dir.exists() and (old / "dir").exists():
            os.rename(old / "dir", out_dir)  # put the previous directory back
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return out_dir


def _put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
