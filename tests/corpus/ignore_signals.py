"""The answer cell ignores SIGINT and SIGTERM and sleeps for ever: the judge's own deadline (which
no notebook can change) stops the sandbox; every graded cell 0 with the reason."""
from . import expect

SOURCE = '''
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(10 ** 6)
'''
WHY = "did not finish running the notebook's cells"
EXPECT = expect((0, WHY), (0, WHY), (0, WHY))
EXPECT_GPU = expect((0, WHY), (0, WHY), (0, WHY))
STATUS = "caught"
