// wrong: P·V accumulated in fp16 (the unnormalized running output overflows 65504)
// expect: fa2/fa2_d128_a/large-v nonfinite
// expect: fa2/fa2_d64_a/large-v nonfinite
#define WRONG_FP16_PV
#include "../fa2.cu"
