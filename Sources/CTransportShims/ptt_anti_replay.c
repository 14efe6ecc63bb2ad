#include "ptt_anti_replay.h"

#include <time.h>

/* The layout of struct gnutls_anti_replay_st in GnuTLS 3.7.0 to 3.8.x (lib/tls13/anti_replay.c); not public. */
struct ptt_anti_replay_layout {
    uint32_t window;
    struct timespec start_time;
    gnutls_db_add_func db_add_func;
    void *db_ptr;
};

static int ptt_probe_add(void *ptr, time_t exp_time, const gnutls_datum_t *key, const gnutls_datum_t *data) {
    (void)ptr;
    (void)exp_time;
    (void)key;
    (void)data;
    return GNUTLS_E_DB_ENTRY_EXISTS;
}

int ptt_anti_replay_layout_known(gnutls_anti_replay_t context) {
    if (context == NULL || gnutls_check_version("3.7.0") == NULL || gnutls_check_version("3.9.0") != NULL) {
        return 0;
    }
    const struct ptt_anti_replay_layout *layout = (const struct ptt_anti_replay_layout *)(const void *)context;
    /* init stamped the start with the wall clock: within a day of now */
    time_t now = time(NULL);
    if (layout->start_time.tv_sec < now - 86400 || layout->start_time.tv_sec > now + 86400 ||
        layout->start_time.tv_nsec < 0 || layout->start_time.tv_nsec >= 1000000000L) {
        return 0;
    }
    static int marker;
    gnutls_anti_replay_set_window(context, 0x5A17C0DEu);
    gnutls_anti_replay_set_ptr(context, &marker);
    gnutls_anti_replay_set_add_function(context, ptt_probe_add);
    return layout->window == 0x5A17C0DEu && layout->db_ptr == (void *)&marker && layout->db_add_func == ptt_probe_add;
}

void ptt_anti_replay_set_start(gnutls_anti_replay_t context, int64_t unix_seconds) {
    struct ptt_anti_replay_layout *layout = (struct ptt_anti_replay_layout *)(void *)context;
    layout->start_time.tv_sec = (time_t)unix_seconds;
    layout->start_time.tv_nsec = 0;
}
