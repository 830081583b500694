"""Recrawl windows: the time source every aging component reads, and the generations of a window.

A layer of its own above the filter and the stores, which both age by it: see
:mod:`.window` for what a window guarantees and :mod:`.clock` for the time.
"""

from .clock import Clock, ManualClock, system_clock
from .window import DEFAULT_GENERATIONS, MAX_GENERATIONS, Window

__all__ = ["Clock", "DEFAULT_GENERATIONS", "MAX_GENERATIONS", "ManualClock", "Window", "system_clock"]
