#include "quant/quant_impl.h"
void quant_fill_avx2(struct quant_isa_table *t) { (void)t; }
