// wrong: the block table is ignored (sequence b's pages assumed at b·max_pages + i)
// expect: dec/pdec_d128_a/paged16/ nonfinite|mismatch
// expect: dec/pdec_d128_a/paged64/ nonfinite|mismatch
#define WRONG_PAGE_IGNORED
#include "../decode.cu"
