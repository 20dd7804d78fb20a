// wrong: the ragged last K/V tile is taken as full (rows past Sk read: the next head's keys, or poison)
// expect: fa2/fa2_d128_a/full/S1031 nonfinite|mismatch
// expect: fa2/fa2_d64_a/full/S65 nonfinite|mismatch
#define WRONG_KV_OOB
#include "../fa2.cu"
