"""HideNseek (notebook 04): preset, study drivers, claims, figures, exercise; see README.md."""
