"""Per-op validation, shape inference and dispatch, all driven by the specs."""
