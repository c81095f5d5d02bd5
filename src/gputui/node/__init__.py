"""Node acceptance (domain.md §6): `vram-check` and `burn`, on PyTorch or CuPy found at run time.

Importing this package loads neither library (nor NumPy): `runtimes.open_runtime` finds them when a
check runs. `patterns` holds the backend-agnostic verification logic, tested on NumPy arrays.
"""
