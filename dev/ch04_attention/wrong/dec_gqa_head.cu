// wrong: query head g of KV head j taken as g·Hkv + j (interleaved) instead of j·G + g
// expect: dec/dec_d128_a/contig/Hq8-Hkv2/ mismatch
// expect: dec/dec_d128_a/contig/Hq32-Hkv8/ mismatch
#define WRONG_GQA_HEAD
#include "../decode.cu"
