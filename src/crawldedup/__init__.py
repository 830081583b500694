"""crawldedup: has this page already been claimed?"""

__version__ = "0.1.0"

__all__ = [
    "__version__",
]
