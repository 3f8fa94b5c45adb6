"""Layer 1, the framework: what every op and every surface shares, and knows no op.

Graphs (``graph``, ``scope``, ``session``, ``gradients``, ``graphdef``), the three
op-keyed tables (``registry``: op definitions, kernels, gradients), ``dtypes``,
``layouts``, ``tensor``, ``errors``, ``memory`` and ``threads``.  It imports only
``fbnops.specs`` below it; the ops (``fbnops.ops``) fill its tables when imported.
"""
