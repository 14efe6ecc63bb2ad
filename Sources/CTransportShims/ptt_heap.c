#include "ptt_heap.h"

#include <malloc.h>
#include <stdlib.h>

/* Keeps this much free at the top of each heap: Foundation's Process.run (findMaximumOpenFromProcSelfFD) copies a
 * whole 280-byte dirent out of readdir's buffer even when the entry ends sooner, so a buffer that ends where a
 * trimmed heap ends made that read fault (seen once in a full test run: a bad pointer in memcpy under
 * Process.run). 256 KiB per arena is a small price next to what the trim returns. */
enum { PTT_HEAP_TOP_PAD = 256 * 1024 };

int ptt_release_free_heap(void) { return malloc_trim(PTT_HEAP_TOP_PAD); }

/* Below glibc's mmap threshold (128 KiB at least), so every chunk comes from the thread's arena. */
enum { PTT_HEAP_RESERVE_CHUNK = 64 * 1024, PTT_HEAP_RESERVE_MAX_CHUNKS = 1024 };

size_t ptt_reserve_thread_heap(size_t bytes) {
    void *chunks[PTT_HEAP_RESERVE_MAX_CHUNKS];
    size_t wanted = bytes / PTT_HEAP_RESERVE_CHUNK;
    if (wanted > PTT_HEAP_RESERVE_MAX_CHUNKS) wanted = PTT_HEAP_RESERVE_MAX_CHUNKS;
    size_t count = 0;
    while (count < wanted) {
        void *chunk = malloc(PTT_HEAP_RESERVE_CHUNK);
        if (chunk == NULL) break;
        chunks[count++] = chunk;
    }
    /* Newest first: each joins the top of the heap, which glibc then trims (its pages go back, its mapping stays
     * writable). */
    for (size_t index = count; index > 0; index--) free(chunks[index - 1]);
    return count * PTT_HEAP_RESERVE_CHUNK;
}
