// wrong: causal mask off by one (each row also sees the key just past the diagonal)
// expect: fa2/fa2_d128_a/causal mismatch
// expect: fa2/fa2_d64_a/causal mismatch
#define WRONG_CAUSAL_OBO
#include "../fa2.cu"
