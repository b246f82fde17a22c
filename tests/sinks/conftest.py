"""Registers the sink test fixtures (defined in sink_helpers)."""
from sink_helpers import export  # noqa: F401  (pytest fixture)
