"""A progress bar on stderr, only when stderr is a terminal (rich, when installed).

Tables stay on stdout.  When stdout is the same terminal, lines printed while the bar is
shown are drawn above it (rich redirects them); when stdout is a file or a pipe, nothing
of the bar reaches it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


class _Bar:
    def __init__(self, progress=None, task=None):
        self._progress, self._task = progress, task

    def advance(self, description: str | None = None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, **({"description": description} if description else {}))


@contextlib.contextmanager
def progress(total: int, description: str) -> Iterator[_Bar]:
    if not sys.stderr.isatty():
        yield _Bar()
        return
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        yield _Bar()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    bar = Progress(*columns, console=Console(file=sys.stderr), transient=True, redirect_stdout=sys.stdout.isatty())
    with bar:
        yield _Bar(bar, bar.add_task(description, total=total))
