"""STC with projection aggregation (notebook 01_stc_projection).

README.md describes the paper, our choices and what the notebook reproduces."""
