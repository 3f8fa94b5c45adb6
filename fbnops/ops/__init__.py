"""Layer 2, the ops: one module per op (its eager body, shape rule, graph binding and
gradient, registered side by side), plus what they share: ``execute`` (validate,
dispatch to a kernel), ``op_def`` (the graph binding of a spec), ``validation``,
``shape_inference``, ``canonical`` (the ``(outer, C, inner)`` view) and ``convert``."""
