"""A wrong kernel, and an IPython AST transformer that wraps every later cell in try/except, so the
notebook's own test cells never fail: the judge evaluates the tests in its own process."""
from . import NO_GPU, WRONG, WRONG_KERNEL, expect

SOURCE = WRONG_KERNEL + '''
import ast
from IPython import get_ipython

class Swallow(ast.NodeTransformer):
    def visit_Module(self, node):
        handler = ast.ExceptHandler(type=ast.Name("BaseException", ast.Load()), name=None, body=[ast.Pass()])
        return ast.fix_missing_locations(ast.Module(body=[ast.Try(body=node.body, handlers=[handler],
                                                                  orelse=[], finalbody=[])], type_ignores=[]))

get_ipython().ast_transformers.append(Swallow())
'''
EXPECT = expect((0, WRONG), (0, WRONG), (0, NO_GPU))
EXPECT_GPU = expect((0, WRONG), (0, WRONG), (0, "no timed runs"))
STATUS = "no effect"
