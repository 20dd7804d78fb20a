"""Wrong kernels kept on purpose: each must be caught by the grader (see the tests beside)."""
