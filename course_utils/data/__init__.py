"""Data sets and task generators the lessons use (one module per data set or task)."""
