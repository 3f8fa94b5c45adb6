"""Array files, read and written defensively.

Reading: a ``.npy`` (or one member of an ``.npz``) is checked from its header before a
byte of data is read: the dtype must be numeric (never a pickled object), the size the
header claims must fit in memory (``ResourceExhaustedError`` otherwise) and must be
present in the file (a truncated file is an error, not a short read).

Writing: ``.npz`` files hold plain arrays that ``numpy.load`` reads without
``allow_pickle``.  **bfloat16 arrays are stored widened to float32** (exact: every
bfloat16 is a float32) because the ``.npy`` format has no bfloat16; ``load_npz``
gives them back as bfloat16, using the dtype table the writer stores under the key
``__dtypes__``.  Files are written to a temporary file beside the target and renamed
over it, so an error or an interrupt leaves the previous file intact.
"""

from __future__ import annotations

import io
import os
import signal
import stat
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import numpy as np

from ..framework import dtypes
from ..framework.memory import check_fits

DTYPES_KEY = "__dtypes__"  # an array of "name=dtype" strings for the arrays stored widened


class ArrayFileError(ValueError):
    pass


def _read_header(f: IO[bytes], name: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, data offset) of an .npy stream, checked; nothing but the header is read."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(f, max_header_size=10_000)
    except (ValueError, OSError, SyntaxError) as e:
        raise ArrayFileError(f"{name}: not a valid .npy header ({e})") from None
    if dtype.hasobject or dtype.kind not in "biufcV" or (dtype.kind == "V" and dtype.itemsize != 2):
        raise ArrayFileError(f"{name}: holds {dtype}; only numeric arrays are read")
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    check_fits(nbytes, f"{name} ({list(shape)} {dtype}, from its .npy header)")
    return shape, dtype, nbytes


def _check_present(name: str, nbytes: int, available: int) -> None:
    if available < nbytes:
        raise ArrayFileError(f"{name}: truncated; the header promises {nbytes} bytes of data, the file has {available}")


def _open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file; a FIFO, device or socket is refused without
    waiting for a writer (the open does not block, and nothing is read from it)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ArrayFileError(f"{Path(path).name} is not a regular file ({_kind(mode)}); arrays are read from files")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def load_array(path: Path, key: str | None = None) -> np.ndarray:
    """One array from an ``.npy`` file, or the member ``key`` of an ``.npz``, header checked first."""
    name = f"{path.name}[{key}]" if key is not None else path.name
    try:
        if key is None:
            with _open_regular(path) as f:
                _, _, nbytes = _read_header(f, name)
                _check_present(name, nbytes, os.fstat(f.fileno()).st_size - f.tell())
                f.seek(0)
                return np.load(f, allow_pickle=False)
        with _open_regular(path) as raw, zipfile.ZipFile(raw) as z:
            member = f"{key}.npy"
            if member not in z.namelist():
                keys = sorted(n.removesuffix(".npy") for n in z.namelist() if n != f"{DTYPES_KEY}.npy")
                raise ArrayFileError(f"{path.name} has no array {key!r}; it has {keys}")
            info = z.getinfo(member)
            with z.open(member) as f:
                _, _, nbytes = _read_header(f, name)
                header_len = f.tell()
            _check_present(name, nbytes, info.file_size - header_len)
            with z.open(member) as f:
                arr = np.lib.format.read_array(f, allow_pickle=False)
            stored = _stored_dtypes(z)
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise ArrayFileError(f"cannot load {name}: {getattr(e, 'strerror', None) or e}") from None
    except ValueError as e:
        if isinstance(e, ArrayFileError):
            raise
        raise ArrayFileError(f"cannot load {name}: {e}") from None
    if key in stored:
        arr = arr.astype(stored[key])
    return arr


def _stored_dtypes(z: zipfile.ZipFile) -> dict[str, np.dtype]:
    if f"{DTYPES_KEY}.npy" not in z.namelist():
        return {}
    with z.open(f"{DTYPES_KEY}.npy") as f:
        table = np.lib.format.read_array(f, allow_pickle=False)
    pairs = (str(entry).rpartition("=") for entry in table.reshape(-1))
    return {k: dtypes.from_tf_name(v) for k, _, v in pairs if v in ("bfloat16",)}


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of an fbnops output ``.npz``, bfloat16 ones as bfloat16 again.

    ``numpy.load(path)`` reads the same file; there bfloat16 arrays are float32 (exact).
    """
    path = Path(path)
    with _open_regular(path) as raw, zipfile.ZipFile(raw) as z:
        keys = [n.removesuffix(".npy") for n in z.namelist() if n.endswith(".npy") and n != f"{DTYPES_KEY}.npy"]
    return {k: load_array(path, k) for k in keys}


def check_writable(out: Path) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ArrayFileError(f"output directory {str(parent)!r} does not exist")
    if out.is_dir():
        raise ArrayFileError(f"output {str(out)!r} is a directory")
    if out.exists() and not out.is_file() and not _is_device(out):  # a FIFO or socket is not replaced either
        raise ArrayFileError(f"output {str(out)!r} is {_kind(os.stat(out).st_mode)}, not a file to replace")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ArrayFileError(f"output directory {str(parent)!r} is not writable")


def save_npz(results: dict[str, np.ndarray], out: Path) -> None:
    """Write ``results`` to ``out`` atomically: a temporary file beside it, renamed over it."""
    check_writable(out)
    arrays, widened = {}, []
    for k, v in results.items():
        v = np.asarray(v)
        if v.dtype.hasobject or v.dtype.kind not in "biuf" and v.dtype != dtypes.bfloat16:
            raise ArrayFileError(f"output {k!r} has dtype {v.dtype}; only numeric arrays are saved")
        if v.dtype == dtypes.bfloat16:
            v = v.astype(np.float32)
            widened.append(f"{k}=bfloat16")
        arrays[k] = v
    if widened:
        arrays[DTYPES_KEY] = np.array(widened)
    if _is_device(out):  # /dev/null, /dev/full: written to (ENOSPC is an error), never replaced by a file
        archive = io.BytesIO()  # a zip needs a seekable file; a device is not one
        np.savez(archive, **arrays)
        with open(out, "wb") as f:
            f.write(archive.getbuffer())
            f.flush()
        return
    with _termination_unwinds():
        tmp = None
        try:
            where = out.parent if str(out.parent) else "."
            fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=where)
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out)
        finally:  # an error, KeyboardInterrupt or SIGTERM leaves no temporary file and the old output intact
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)


def _is_device(out: Path) -> bool:
    try:
        return stat.S_ISCHR(os.stat(out).st_mode)
    except OSError:  # absent (or unreadable: the write says why)
        return False


class _Terminated(BaseException):
    """SIGTERM arrived during a save: unwinds it (its ``finally`` removes the temporary file)."""


@contextmanager
def _termination_unwinds() -> Iterator[None]:
    """For the block's duration, SIGTERM unwinds the stack; afterwards it is delivered as it would have been."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers
        return

    def unwind(signum, frame):
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, previous)
        previous = None
        os.kill(os.getpid(), signal.SIGTERM)  # the original disposition: usually, the process ends here
        raise KeyboardInterrupt from None  # a handler that returned: stop the command as an interrupt does
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
