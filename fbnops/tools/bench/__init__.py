"""The benchmark: fbnops side by side with PyTorch, TensorFlow, real oneDNN, its own other
backends, and the streaming floor.

- :mod:`.cases`: the case table (op x dtype x shape x layout) and its data
- :mod:`.peers`: one callable per peer and case (:mod:`.onednn`: the C++ harness)
- :mod:`.timing`: interleaved paired rounds, the floor, the per-call cost
- :mod:`.report`: machine, table, summary, comparison, plot, Markdown
- :mod:`.attack_report`: the reliability page's hostile-input figures (``benchmarks/reliability.py --json``)
- :mod:`.__main__`: the command (``fbnops bench``, ``python -m fbnops.tools.bench``)
"""
