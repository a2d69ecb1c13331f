/*
 * punctual.h — CPU reservations and time constraints for C programs.
 *
 * Link with the punctual-reserve library (libpunctual_reserve.so or .a,
 * built by `cargo build -p punctual-reserve`; the static library also needs
 * -lpthread -ldl -lm).
 *
 * State is per thread, like the kernel's scheduling attributes: each call
 * acts on the calling thread. Functions return 0 (or 1, where documented)
 * on success and -1 on failure; punctual_last_error() then gives one
 * sentence saying what was wrong and what to change.
 *
 * Times are nanoseconds. A reservation is "budget_ns of CPU in every
 * period_ns", enforced by SCHED_DEADLINE (needs root or CAP_SYS_NICE).
 */
#ifndef PUNCTUAL_H
#define PUNCTUAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rez: the kernel's constant-bandwidth server as it is. */
#define PUNCTUAL_MODE_PLAIN 0
/* Rez-C: a larger maximum is admitted; the thread yields once it has
 * received its budget (tell it with punctual_reserve_received). */
#define PUNCTUAL_MODE_CATCHUP 1
/* Rez-FB: each period's budget follows charged minus received time
 * (tell it with punctual_reserve_period_end). */
#define PUNCTUAL_MODE_FEEDBACK 2

struct punctual_report {
    uint64_t periods;           /* periods closed by punctual_reserve_period_end */
    uint64_t misses;            /* periods that received less than the budget */
    uint64_t budget_ns;
    uint64_t period_ns;
    uint64_t runtime_ns;        /* budget currently handed to the kernel */
    uint64_t received_total_ns; /* as reported by the thread */
    uint64_t charged_total_ns;  /* as the kernel charged the thread */
};

/* Takes a reservation for the calling thread. deadline_ns 0 = period;
 * gain is Rez-FB's G in (0, 2); max_budget_ns 0 = 1.5 x budget. */
int punctual_reserve_take(uint64_t budget_ns, uint64_t period_ns, uint64_t deadline_ns,
                          int mode, double gain, uint64_t max_budget_ns);

/* What the thread received so far in this period. Under catch-up, once it
 * reaches the budget the thread yields until its next period: returns 1
 * then, 0 otherwise. */
int punctual_reserve_received(uint64_t received_ns);

/* Closes a period with what the thread received in it (its own view):
 * counts hit/miss; under feedback sets the next period's budget. */
int punctual_reserve_period_end(uint64_t received_ns);

/* Copies this thread's report. */
int punctual_reserve_report(struct punctual_report *out);

/* Returns the thread to SCHED_OTHER. */
int punctual_reserve_release(void);

/* Asks for estimate_ns of CPU between start_in_ns and deadline_in_ns from
 * now. 1 = granted: the thread sleeps until the start and then runs under
 * the constraint until punctual_end_constraint. 0 = denied up front
 * (reason in punctual_last_error); nothing changed. */
int punctual_begin_constraint(uint64_t start_in_ns, uint64_t deadline_in_ns,
                              uint64_t estimate_ns);

/* Ends the constraint, restores the previous scheduling parameters and
 * writes the wall time taken (may be NULL). */
int punctual_end_constraint(uint64_t *taken_ns);

/* Copies the last failure's sentence into buf (NUL-terminated, truncated
 * to len); returns its full length. */
size_t punctual_last_error(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* PUNCTUAL_H */
