// wrong: the running output is not rescaled by 2^(m_old - m_new) when the row max grows
// expect: fa2/fa2_d128_a/growing mismatch
// expect: fa2/fa2_d64_a/growing mismatch
#define WRONG_NO_RESCALE
#include "../fa2.cu"
