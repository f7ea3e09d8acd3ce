"""Course assignments with nbgrader: graded exercises, a student release and an autograder.

- :mod:`.checks`: what every exercise checker shares (a verdict that says "right", "wrong" with a
  hint, or "not attempted yet" beside the reference result; ``require`` turns a checker into a
  graded test that fails with the checker's hint);
- :mod:`.nbgrader_run`: ``release`` (the student version of every notebook) and ``grade``
  (autograde a folder of submissions into grades.csv and per-student feedback HTML), both through
  nbgrader's own generate_assignment / autograde / generate_feedback in a throwaway course folder
  (:mod:`.course_dir`);
- :mod:`.student_version`: the graded cells of a notebook as the release writes them, the rest
  left as it is (the book publishes executed notebooks with their exercises so);
- :mod:`.exercise_cells`: which cells of a submission the grading runs (what the exercises need);
- :mod:`.autograde`: one (student, notebook) graded in a course folder of its own, ``jobs`` at a
  time in separate processes;
- :mod:`.seal` and :mod:`.hidden_tests`: the hidden tests run the checkers as they were before the
  submission ran (what it changed is put back and named); :mod:`.tampering`: what in a
  submission's own cells reaches into the interpreter (its points are withheld for review);
- :mod:`.command`: ``flkit course student [DIR]``, ``flkit course release DIR`` and ``flkit
  course grade SUBMISSIONS_DIR``.

nbgrader is imported only when releasing or grading, so checkers work without it.
"""

from .checks import Verdict, check_cases, check_choice, check_number, not_attempted, require

__all__ = ["Verdict", "check_cases", "check_choice", "check_number", "not_attempted", "require"]
