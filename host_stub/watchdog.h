/*
 * watchdog.h — ends a run whose plugin call, or device work, hangs.
 *
 * The training loop arms the watchdog before each call that could block on
 * the plugin (a host plugin's forward or backward, a device step's enqueue, a
 * wait for the device) and disarms it after. A thread checks the armed
 * deadline; once it passes it prints one message naming what hung, the step
 * and the last checkpoint written, and ends the process with
 * ATH_EXIT_HUNG. The checkpoint on disk is intact: it is replaced only by
 * rename, and the watchdog never runs while one is being written (nothing is
 * armed then). A hung call cannot be cancelled from inside the process, so
 * ending it is the only safe outcome.
 */
#ifndef ATH_WATCHDOG_H
#define ATH_WATCHDOG_H

#include <stdint.h>

/* Starts the thread: a call may take at most timeout_s seconds (<= 0: no
 * watchdog). Returns 0, or -1 when the thread cannot be started. */
int ath_watchdog_start(double timeout_s);
void ath_watchdog_stop(void);

/* what: a static string ("forward", "the device"). */
void ath_watchdog_arm(const char *what, uint64_t step);
void ath_watchdog_disarm(void);

/* The last checkpoint written, for the message (path stays valid). */
void ath_watchdog_checkpoint(const char *path, uint64_t step);

#endif
