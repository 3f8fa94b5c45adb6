"""What the ``fbnops`` command line drives: run files, the benchmark, ``explain``.

- :mod:`fbnops.tools.runfile`: scripted builder calls from JSON/YAML (validated against
  ``runfile.schema.json``) and GraphDef ``.pbtxt`` runs, saved atomically to ``.npz``.
- :mod:`fbnops.tools.explain`: every intermediate of the forward and the gradient for a
  small input, with formulas and numbers, checked against the kernels.
- :mod:`fbnops.tools.bench`: the side-by-side benchmark (``python -m fbnops.tools.bench``).
"""
