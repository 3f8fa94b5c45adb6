"""Run a crash-prone call in a fresh Python process and say how it ended.

``run_isolated(fn_or_code, timeout=...)`` -> :class:`Outcome` with ``kind``:

* ``"ok"``    - it returned (``value`` holds the result when it can be pickled);
* ``"error"`` - it raised (``error_type``, ``message``; ``typed`` is True for an
  :class:`fbnops.errors.OpError` or one of the ``typed`` classes given: a class, a dotted or
  bare class name, or a module prefix ending in ``.`` such as ``"bindings_mirror."``);
* ``"crash"`` - the process died of a signal (``signal``: ``"SIGSEGV"``, ``"SIGABRT"``, ...)
  or exited without reporting;
* ``"hang"``  - it did not finish within ``timeout`` seconds and was killed.

A segfault, an abort or a hang in the call fails the caller's assertion instead of
killing the test run.  Each call gets its own process (spawned, never forked): no
state leaks from one attack to the next.
"""

from __future__ import annotations

import base64
import os
import pickle
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outcome", "run_isolated"]

_MARK = "\x00fbnops-isolated\x00"

# The child: read (callable or code, args) from stdin, run it, print one marked line.
_CHILD = r"""
import base64, pickle, sys, traceback
MARK = %r
def report(d):
    sys.stdout.write(MARK + base64.b64encode(pickle.dumps(d)).decode() + "\n")
    sys.stdout.flush()
job = pickle.loads(base64.b64decode(sys.stdin.buffer.read()))
limit = job.get("memory_limit")
if limit:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    if job.get("code") is not None:
        scope = {"__name__": "__isolated__"}
        exec(compile(job["code"], "<isolated>", "exec"), scope)
        value = scope.get("result")
    else:
        value = job["fn"](*job["args"], **job["kwargs"])
except BaseException as e:
    typed = False
    try:
        from fbnops.errors import OpError
        typed = isinstance(e, OpError)
    except Exception:
        pass
    names = job["typed"]
    for c in type(e).__mro__:
        full = c.__module__ + "." + c.__qualname__
        typed = typed or full in names or c.__qualname__ in names or any(
            n.endswith(".") and full.startswith(n) for n in names)
    report({"kind": "error", "error_type": type(e).__module__ + "." + type(e).__qualname__,
            "mro": [c.__module__ + "." + c.__qualname__ for c in type(e).__mro__],
            "message": str(e)[:4000], "typed": typed, "traceback": traceback.format_exc()[-4000:]})
else:
    try:
        payload = pickle.dumps(value)
    except Exception:
        payload = None
    report({"kind": "ok", "value": payload, "repr": repr(value)[:2000]})
"""


@dataclass
class Outcome:
    kind: str  # "ok" | "error" | "crash" | "hang"
    value: Any = None
    error_type: str = ""
    message: str = ""
    typed: bool = False
    signal: str = ""
    mro: list = field(default_factory=list)
    stderr: str = ""
    traceback: str = ""

    @property
    def survived(self) -> bool:
        """Neither a crash nor a hang."""
        return self.kind in ("ok", "error")

    def __str__(self) -> str:
        if self.kind == "error":
            return f"error {self.error_type}: {self.message[:300]}"
        if self.kind == "crash":
            return f"crash ({self.signal or 'no report'}) {self.stderr[-300:]}"
        return self.kind


def _names(classes) -> list[str]:
    return [c if isinstance(c, str) else f"{c.__module__}.{c.__qualname__}" for c in classes]


def run_isolated(
    target,
    *args,
    timeout: float = 60.0,
    typed: tuple = (),
    env: dict | None = None,  # extra variables; a value of None unsets one
    memory_limit: int | None = None,
    **kwargs,
) -> Outcome:
    """Run ``target(*args, **kwargs)`` (a picklable, importable callable) or ``target`` as source code
    (its variable ``result`` is the value) in a new interpreter; never raises for what the call does."""
    job = {
        "code": target if isinstance(target, str) else None,
        "fn": None if isinstance(target, str) else target,
        "args": args,
        "kwargs": kwargs,
        "typed": _names(typed),
        "memory_limit": memory_limit,
    }
    path = os.pathsep.join(p for p in sys.path if p)  # the child imports what the caller can import
    child_env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONPATH=path, **(env or {}))
    child_env = {k: v for k, v in child_env.items() if v is not None}  # None: unset in the child
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD % _MARK],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env,
        start_new_session=True,  # the whole process group can be killed on a hang
    )
    try:
        out, err = proc.communicate(base64.b64encode(pickle.dumps(job)), timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Outcome("hang")
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    report = None
    for line in stdout.splitlines():
        if line.startswith(_MARK):
            report = pickle.loads(base64.b64decode(line[len(_MARK) :]))
    if proc.returncode < 0:
        return Outcome("crash", signal=signal.Signals(-proc.returncode).name, stderr=stderr[-4000:])
    if report is None:
        return Outcome("crash", signal=f"exit status {proc.returncode}", stderr=stderr[-4000:])
    if report["kind"] == "ok":
        value = pickle.loads(report["value"]) if report["value"] is not None else report["repr"]
        return Outcome("ok", value=value, stderr=stderr[-4000:])
    return Outcome(
        "error",
        error_type=report["error_type"],
        message=report["message"],
        typed=report["typed"],
        mro=report["mro"],
        stderr=stderr[-4000:],
        traceback=report["traceback"],
    )
