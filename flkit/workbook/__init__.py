"""What the notebooks use around the library: presets (`presets`), the record of a notebook's
numbers, claims and figures (`report`) and its readers (`results`), how preset values were chosen
(`decisions`), the plot style (`plots`),
interactive demos (`widgets`), the measured run times (`run_times`) and progress bars
(`progress`). Import the module you need: this package imports none of them by itself, so that a
run without notebooks does not load matplotlib or ipywidgets."""

__all__ = ["decisions", "plots", "presets", "progress", "report", "results", "run_times", "widgets"]
