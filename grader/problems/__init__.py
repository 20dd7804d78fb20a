"""The graded problems of each chapter: inputs, float64 references, sizes, targets.

Lessons import them (``from grader.problems import elementwise as P``) so the
visible tests, the hidden tests, the speed cell and the scoreboard all check
the same thing.
"""
