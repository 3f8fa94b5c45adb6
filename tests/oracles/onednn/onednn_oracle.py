"""Real oneDNN as an oracle: find an install, compile harness.cpp once (cached), run one case per process.

Installs looked for (each optional):

* oneDNN 3.2: the ``onednn-devel-cpu-gomp`` + ``onednn-cpu-gomp`` 2023.2.0 wheels (the ``onednn`` extra)
  in this Python's prefix;
* oneDNN 3.13: a prefix given by ``FBNOPS_ONEDNN_PREFIX`` (e.g. a venv with the ``onednn``/``onednn-devel``
  2026.1.0 wheels), or ``~/.cache/fbnops/onednn-3.13``.

The binary is cached under ``~/.cache/fbnops/onednn-harness/`` (or ``FBNOPS_CACHE``), keyed by the harness's
hash and the library version, so the suite compiles it once per machine.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
HARNESS = HERE / "harness.cpp"
CACHE = Path(os.environ.get("FBNOPS_CACHE", Path.home() / ".cache" / "fbnops")) / "onednn-harness"


@dataclass(frozen=True)
class Install:
    prefix: Path
    version: tuple[int, int, int]

    @property
    def name(self) -> str:
        return ".".join(map(str, self.version))

    def env(self) -> dict[str, str]:
        env = dict(os.environ, LD_LIBRARY_PATH=str(self.prefix / "lib"), ONEDNN_VERBOSE="0")
        ocl = self.prefix / "lib" / "libintelocl.so"
        if ocl.exists():  # the SYCL-runtime wheels need their OpenCL CPU driver
            env["OCL_ICD_FILENAMES"] = str(ocl)
        return env


def _version(prefix: Path) -> tuple[int, int, int] | None:
    header = prefix / "include" / "oneapi" / "dnnl" / "dnnl_version.h"
    if not header.exists() or not list((prefix / "lib").glob("libdnnl.so*")):
        return None
    text = header.read_text()
    parts = [re.search(rf"#define DNNL_VERSION_{k} (\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        return None
    return tuple(int(p.group(1)) for p in parts)  # type: ignore[return-value]


def _candidates() -> list[Path]:
    out = []
    try:
        import importlib.metadata as md

        dist = md.distribution("onednn-devel-cpu-gomp")
        out.append(Path(dist.locate_file("")).resolve().parents[2])  # <prefix>/lib/pythonX.Y/site-packages
    except Exception:  # noqa: BLE001 - not installed
        pass
    if os.environ.get("FBNOPS_ONEDNN_PREFIX"):
        out.append(Path(os.environ["FBNOPS_ONEDNN_PREFIX"]))
    out.append(Path.home() / ".cache" / "fbnops" / "onednn-3.13")
    return out


def not_found(version: str) -> str:
    """Why a test of real oneDNN ``version`` skips (3.13 is not on PyPI's extra: it needs a prefix of its own)."""
    return f"real oneDNN {version} not found: FBNOPS_ONEDNN_PREFIX=<prefix with the onednn 2026.1.0 wheels>"


def installs() -> dict[str, Install]:
    """The oneDNN installs found, by minor version name ("3.2", "3.13")."""
    found = {}
    for prefix in _candidates():
        v = _version(prefix)
        if v is not None:
            found.setdefault(f"{v[0]}.{v[1]}", Install(prefix, v))
    return found


def build(install: Install) -> Path:
    """The compiled harness for ``install``, compiled once and cached by harness hash and version."""
    if shutil.which("g++") is None:
        raise RuntimeError("g++ is not installed")
    digest = hashlib.sha256(HARNESS.read_bytes()).hexdigest()[:16]
    binary = CACHE / f"harness-{digest}-onednn{install.name}"
    if binary.exists():
        return binary
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_suffix(f".tmp{os.getpid()}")
    lib = install.prefix / "lib"
    cmd = ["g++", "-std=c++17", "-O1", f"-I{install.prefix / 'include'}", str(HARNESS), f"-L{lib}"]
    cmd += [f"-Wl,-rpath,{lib}", "-ldnnl", "-o", str(tmp)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    tmp.replace(binary)  # atomic: concurrent builders never see half a binary
    return binary


@dataclass
class Outcome:
    """What the real library did: the last stage reached, its status (C value), the outputs' bytes."""

    stages: dict[str, int]
    out_dims: dict[int, list[int]]
    outputs: dict[int, bytes]
    crashed: str | None = None

    @property
    def accepted(self) -> bool:
        return self.crashed is None and self.stages.get("execute") == 0


def run(binary: Path, install: Install, case_text: str, timeout: float = 30) -> Outcome:
    """One case in its own process (a bad case may abort the real library)."""
    proc = subprocess.run(
        [str(binary)], input=case_text, capture_output=True, text=True, timeout=timeout, env=install.env()
    )
    stages, dims, outputs = {}, {}, {}
    for line in proc.stdout.splitlines():
        words = line.split()
        if words[0] == "outlt":
            dims[int(words[1])] = [int(w) for w in words[3:]]
        elif words[0] == "out":
            outputs[int(words[1])] = bytes.fromhex(words[2] if len(words) > 2 else "")
        elif words[0] == "partitions":
            stages["partitions"] = int(words[1])
            stages["supported"] = int(words[3])
        else:
            stages[words[0]] = -1 if words[1] == "exception" else int(words[1])
    crashed = None if proc.returncode == 0 else f"exit {proc.returncode}"
    return Outcome(stages, dims, outputs, crashed)
