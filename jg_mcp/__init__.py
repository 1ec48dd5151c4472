"""jg-mcp: the goal-only condition for GPU-kernel agents, made reproducible and checkable."""

__version__ = "0.1.0"
