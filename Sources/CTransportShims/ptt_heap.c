#include "ptt_heap.h"

#include <malloc.h>

int ptt_release_free_heap(void) { return malloc_trim(0); }
