// wrong: the split-KV combine averages the chunks' outputs without their LSE weights
// expect: dec/dec_d128_a/contig/Hq8-Hkv2/split64/ mismatch
// expect: dec/dec_d128_a/contig/Hq8-Hkv2/split64-kernel/ mismatch
#define WRONG_COMBINE_NO_LSE
#include "../decode.cu"
