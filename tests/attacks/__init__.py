"""The hostile-input attacks of issue 15, as test functions: one module per class, each attack run in
its own process (:mod:`.runner`).  ``benchmarks/reliability.py`` collects the same functions."""
