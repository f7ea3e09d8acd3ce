"""Notebook 05: unlimited staleness via gradient inversion (Wang and Gao, AAAI 2025)."""
