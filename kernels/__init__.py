"""Numba kernels over numpy arrays (structure of arrays: encoded data, time, diff)."""
