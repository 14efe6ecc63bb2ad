/*
 * Giving freed heap memory back to the system. glibc keeps what `free` returns in its arenas, so a relay's resident
 * memory would stay at its peak after the connections that used it closed.
 */
#ifndef PTT_HEAP_H
#define PTT_HEAP_H

/* glibc's malloc_trim over every arena, keeping a little at each top: 1 if memory went back to the system. */
int ptt_release_free_heap(void);

#endif
