"""Grading from outside the learner's process.

The learner's code runs only in a sandbox (sandbox.py: bubblewrap) that sees no gradebook, no
solutions and no other submission; points come from the judge (judge.py), a process that runs none
of it:

    plan.py      what is graded: the release notebook with the learner's answer cells (by cell id)
    build.py     the judge's own build of the %%cuda cells (sandboxed: NVRTC only)
    runner.py    inside the sandbox: runs the plan, answers the judge's requests
    protocol.py  the messages between them (the judge never unpickles what the runner sends)
    remote.py    the judge's end: deadlines, a dead runner's reason
    verbs.py     check and speed as the judge runs them (inputs, reference, clock, peer: the judge's)
    judge.py     evaluates each graded cell of the source notebook, hidden tests included
    feedback.py  the learner's executed notebook, each graded cell showing the judge's verdict
    gradebook.py nbgrader's gradebook and autograded/ folder, written by the host alone

docs/GRADING.md describes the design, what it catches and what it does not.
"""
