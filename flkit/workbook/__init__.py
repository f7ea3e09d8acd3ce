"""What the notebooks use around the library: presets (`presets`), the record of a notebook's
numbers, claims and figures (`report`) and its readers (`results`), how preset values were
chosen (`decisions`) and how their tables were measured (`decision_runs`), the plot style
(`plots`), captioned tables (`tables`), interactive demos (`widgets`) and the measured run times
(`run_times`); progress bars are `flkit.progress`, below the runs that draw them. Import the
module you need: this package imports none of them by itself, so that a run without notebooks
does not load matplotlib or ipywidgets."""

__all__ = [
    "decision_runs",
    "decisions",
    "plots",
    "presets",
    "report",
    "results",
    "run_times",
    "tables",
    "widgets",
]
