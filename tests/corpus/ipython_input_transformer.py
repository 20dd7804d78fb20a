"""No kernel at all, and an input transformer that turns every later cell into `5.0`: the judge's
test cells never pass through the learner's IPython."""
from . import expect

SOURCE = '''
from IPython import get_ipython
get_ipython().input_transformers_post.append(lambda lines: ["5.0\\n"])
'''
EXPECT = expect((0, "launch_vector_add"), (0, "launch_vector_add"), (0, "launch_vector_add"))
EXPECT_GPU = expect((0, "launch_vector_add"), (0, "launch_vector_add"), (0, "launch_vector_add"))
STATUS = "no effect"
