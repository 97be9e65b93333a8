"""colmz: differential collections as columnar updates.

Public names only; each lives in a module named for its concept.
"""

from colmz.frontier import MAX_TIME, Frontier

__all__ = ["MAX_TIME", "Frontier"]
__version__ = "0.1.0"
