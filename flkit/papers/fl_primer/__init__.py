"""FL primer (notebook 00_fl_primer): FedAvg, non-IID data, FedProx and client drift.

README.md describes what the notebook shows; the modules follow flkit/papers/__init__.py."""
