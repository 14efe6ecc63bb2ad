/*
 * Giving freed heap memory back to the system. glibc keeps what `free` returns in its arenas, so a relay's resident
 * memory would stay at its peak after the connections that used it closed.
 */
#ifndef PTT_HEAP_H
#define PTT_HEAP_H

#include <stddef.h>

/* glibc's malloc_trim over every arena, keeping a little at each top: 1 if memory went back to the system. */
int ptt_release_free_heap(void);

/* Makes the calling thread's malloc arena writable up to about `bytes` ahead of use, then frees it again: glibc grows
 * a thread's (non-main) arena by one mprotect per allocation that passes its top, a few pages at a time, and keeps
 * what it made writable when the heap shrinks (the pages themselves go back to the system). Returns the bytes
 * reserved (0 when the first allocation failed). */
size_t ptt_reserve_thread_heap(size_t bytes);

#endif
