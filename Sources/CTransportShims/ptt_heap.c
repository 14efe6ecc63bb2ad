#include "ptt_heap.h"

#include <malloc.h>

/* Keeps this much free at the top of each heap: Foundation's Process.run (findMaximumOpenFromProcSelfFD) copies a
 * whole 280-byte dirent out of readdir's buffer even when the entry ends sooner, so a buffer that ends where a
 * trimmed heap ends made that read fault (seen once in a full test run: a bad pointer in memcpy under
 * Process.run). 256 KiB per arena is a small price next to what the trim returns. */
enum { PTT_HEAP_TOP_PAD = 256 * 1024 };

int ptt_release_free_heap(void) { return malloc_trim(PTT_HEAP_TOP_PAD); }
