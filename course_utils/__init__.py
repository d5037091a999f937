"""Helpers for the attention course: configuration, reference components, checks, plots.

A component taught in lesson N is available here as a tested reference from lesson N+1 on,
so a learner who is stuck on an exercise can still run the later lessons.
"""
__version__ = "0.1.0"
