"""A right kernel whose cell turns every file the host used to read or write in the sandbox's scratch
folder (the runner's log, the feedback run's notebooks, the records, the modules) into a symbolic
link to a host file: a .pth file in the grader's own Python environment (which would run on the next
`python -m grader`), another student's submission, the course's solutions. The scratch folder is the
sandbox's own tmpfs now and the host reads nothing from it: full points, and the host's files are
as they were (tests/test_corpus.py fingerprints the course and the environment around every case)."""
import site
import sys
from pathlib import Path

from . import KERNEL, NO_GPU, expect

CHECKOUT = Path(__file__).resolve().parents[2]
PTH = Path(site.getsitepackages()[0] if hasattr(site, "getsitepackages") else sys.prefix) / "zz_owned_by_a_student.pth"
TARGETS = [str(PTH), str(CHECKOUT / "solutions" / "01_elementwise" / "01_threads_and_blocks.ipynb"),
           str(CHECKOUT / "course" / "01_elementwise" / "01_threads_and_blocks.ipynb")]
SOURCE = KERNEL + f'''
import os, sys
targets = {TARGETS!r}
names = ["runner.log", "plan.json", "feedback/in.ipynb", "feedback/out.ipynb", "feedback/records.jsonl",
         "feedback/feedback.log", "modules/x.cubin", "build/out/x.json", "records.jsonl", "out.ipynb"]
made = 0
for k, name in enumerate(names):
    path = os.path.join(os.environ.get("HOME", "/sandbox"), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(targets[k % len(targets)], path)
        made += 1
    except OSError as exc:
        print("refused", name, exc, file=sys.__stderr__)
for d in ("/judge", "/judge/modules"):
    try:
        os.symlink(targets[0], os.path.join(d, "planted"))
        print("WROTE into", d, file=sys.__stderr__)
    except OSError as exc:
        print("refused", d, exc, file=sys.__stderr__)
print("LINKS MADE", made, file=sys.__stderr__)
'''
EXPECT = expect((2, ""), (2, ""), (0, NO_GPU))
EXPECT_GPU = expect((2, ""), (2, ""), (1, ""))
FEEDBACK = True
STATUS = "caught"


def after(result):
    assert "LINKS MADE" in result.log and "WROTE into" not in result.log, result.log[-2000:]
    assert not PTH.exists(), f"the host wrote {PTH}"
