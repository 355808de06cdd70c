"""The Django app holding the benchmark models (see ../django_backend.py)."""
