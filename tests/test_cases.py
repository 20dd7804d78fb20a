"""grader.cases.Cases: each case made once, the reference only when asked, the budget kept."""
from __future__ import annotations

import numpy as np

from grader.cases import Cases


class Counting:
    """A problem whose inputs are n float64 and whose reference doubles them, counting the calls; its
    functions are attributes, as a Problem's are (the cache keys on the inputs function itself)."""
    name = "counting"

    def __init__(self):
        self.made = self.referenced = 0

        def make_inputs(rng, n):
            self.made += 1
            return {"x": rng.standard_normal(n)}

        def reference(x):
            self.referenced += 1
            return {"y": 2 * x}
        self.make_inputs, self.reference = make_inputs, reference


def test_a_case_is_made_once_and_its_reference_only_when_asked():
    p, cases = Counting(), Cases()
    inputs, want = cases.get(p, 8, seed=1, reference=False)
    assert want is None and (p.made, p.referenced) == (1, 0)
    again, want = cases.get(p, 8, seed=1)
    assert again is inputs and np.array_equal(want["y"], 2 * inputs["x"]) and (p.made, p.referenced) == (1, 1)
    assert cases.get(p, 8, seed=1)[1] is want and (p.made, p.referenced) == (1, 1)
    assert cases.used == 2 * 8 * 8
    other, _ = cases.get(p, 8, seed=2)
    assert not np.array_equal(other["x"], inputs["x"]) and p.made == 2


def test_the_least_recently_used_case_leaves_first_and_the_budget_holds():
    p = Counting()
    cases = Cases(budget=2 * 2 * 8 * 8)                   # room for two cases of 8 with references
    cases.get(p, 8, seed=1)
    cases.get(p, 8, seed=2)
    cases.get(p, 8, seed=1)                               # 1 is now the most recent
    cases.get(p, 8, seed=3)                               # 2 leaves
    assert cases.used <= cases.budget and p.made == 3
    cases.get(p, 8, seed=1)
    assert p.made == 3                                    # still kept
    cases.get(p, 8, seed=2)
    assert p.made == 4                                    # made again
    big = Cases(budget=10)
    big.get(p, 8, seed=1)
    assert big.used == 0 and not big._rows                # larger than the budget: returned, not kept
