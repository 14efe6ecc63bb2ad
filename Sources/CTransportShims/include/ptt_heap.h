/*
 * Giving freed heap memory back to the system. glibc keeps what `free` returns in its arenas, so a relay's resident
 * memory would stay at its peak after the connections that used it closed.
 */
#ifndef PTT_HEAP_H
#define PTT_HEAP_H

/* glibc's malloc_trim(0) over every arena: returns 1 if memory went back to the system, 0 if none could. */
int ptt_release_free_heap(void);

#endif
