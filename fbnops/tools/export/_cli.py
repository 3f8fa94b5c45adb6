"""``fbnops export --target TARGET -o DIR [--feed NAME=FILE.npy ...] [--fetch NAME ...] [--force] SOURCE``.

SOURCE is read exactly as ``fbnops run`` reads it (:mod:`fbnops.tools.runfile`): a run file
(JSON/YAML: its inputs and its ``fetch`` list) or a GraphDef ``.pbtxt`` (``--feed``/``--fetch``).
A graph that would not run fails with the very message ``fbnops run`` prints for it.
"""

from __future__ import annotations

from pathlib import Path

from fbnops.framework.errors import OpError
from fbnops.tools import runfile

from . import build_plan, check_request, write_plan


def export_command(
    source: Path, target: str, out_dir: Path, feeds: dict[str, str], fetch: list[str], force: bool
) -> tuple[Path, object]:
    """Export SOURCE; ``(directory, plan)``. Errors are the CLI's (one line, exit 2)."""
    check_request(target, out_dir, force)
    if source.suffix == ".pbtxt":
        graph, outputs, feed_values = runfile.load_pbtxt(source, feeds, fetch, None)
        try:
            plan = build_plan(graph, feeds=feed_values, fetches=outputs, source=source.name)
        except OpError as e:  # as run_pbtxt reports it
            raise runfile.RunFileError((), str(e), file=str(source)) from None
    else:

        def plan_run_file(doc, base, backend):
            graph, outputs = runfile.build(doc, base, backend)
            try:
                return build_plan(graph, fetches=outputs, source=source.name)
            except OpError as e:  # as runfile.run reports it
                raise runfile.RunFileError(("fetch",), f"running the graph: {e}") from None

        plan = runfile.located_step(plan_run_file, source, None)
    return write_plan(plan, target, out_dir, force), plan
