"""An answer cell that ignores SIGINT and sleeps. The sandbox's time limit comes from the lesson's
recorded time (grader/data/lesson_times.json: a few times the reference's own time), not a flat
900 s: the sandbox is stopped there and every graded cell says which bound it hit. (The corpus
runs under $GRADER_JUDGE_NOTEBOOK_S=20, which the message names; tests/test_judge.py checks the
bound derived from the lesson's time.)"""
from . import expect

SOURCE = '''
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
time.sleep(10 ** 6)
'''
WHY = "within 20 s, its time limit for running cells ($GRADER_JUDGE_NOTEBOOK_S)"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = EXPECT
STATUS = "caught"
