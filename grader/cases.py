"""A problem's cases — its inputs for (size, seed) and, when asked, their float64 reference — made once
and kept while they fit in a byte budget, least recently used first out. The judge keeps the hidden
cases of a whole run (grader.judge.verbs.CASES), the runner the inputs the judge asks for more than
once, and a notebook graded for its feedback the one case its versions share (grader.check)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np


def _bytes(d: dict | None) -> int:
    return sum(v.nbytes for v in (d or {}).values() if isinstance(v, np.ndarray))


class Cases:
    def __init__(self, budget: int = 4 * 2**30):
        self.budget, self.used, self._rows = budget, 0, OrderedDict()

    def get(self, problem, size, seed: int, reference: bool = True) -> tuple[dict, dict | None]:
        """(inputs, reference outputs) of ``problem`` at ``size`` drawn with ``seed``; the reference is
        None when not asked for (and computed later, once, if a later call asks)."""
        key = (problem.name, repr(size), seed, id(problem.make_inputs))
        inputs, want = self._rows.pop(key, (None, None))
        if inputs is None:
            inputs = problem.make_inputs(np.random.default_rng(seed), size)
        else:
            self.used -= _bytes(inputs) + _bytes(want)
        if reference and want is None:
            want = {k: np.asarray(v) for k, v in problem.reference(**inputs).items()}
        cost = _bytes(inputs) + _bytes(want)
        if cost <= self.budget:
            self._rows[key] = (inputs, want)            # the newest at the end
            self.used += cost
            while self.used > self.budget:
                _, (i, w) = self._rows.popitem(last=False)
                self.used -= _bytes(i) + _bytes(w)
        return inputs, want
