"""One module per backend; see base.py for the interface and ../README.md."""
