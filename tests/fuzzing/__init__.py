"""Crash-safe fuzzing of every public entry: cases as plain data (:mod:`.cases`), how each surface runs
one (:mod:`.surfaces`), and the worker process that runs them (:mod:`.harness`).  Used by
``tests/test_fuzz.py`` and ``benchmarks/reliability.py --full``."""
