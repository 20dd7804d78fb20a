// wrong: decode reads K/V past L_b (the last tile taken as full, no mask) in a ragged batch
// expect: dec/dec_d128_a/contig/Hq8-Hkv2/split64/ragged nonfinite
// expect: dec/dec_d64_a/contig/Hq8-Hkv2/auto/ragged nonfinite
#define WRONG_KV_OOB
#include "../decode.cu"
