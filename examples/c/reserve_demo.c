/*
 * reserve_demo: a C thread takes 4 ms every 20 ms under Rez-FB, measures
 * what it receives by polling the clock (as punctual's test application
 * does), reports each period to the library, then asks for a time
 * constraint that fits and one that cannot, and prints what happened.
 *
 * Build: cc -I include examples/c/reserve_demo.c -L <target>/debug -lpunctual_reserve
 * Exit status: 0 on success, 2 when reservations are not permitted here.
 */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include "punctual.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(void) {
    char err[512];
    const uint64_t budget = 4000000, period = 20000000, gap = 2000;
    if (punctual_reserve_take(budget, period, 0, PUNCTUAL_MODE_FEEDBACK, 0.5, 0) != 0) {
        punctual_last_error(err, sizeof err);
        fprintf(stderr, "reserve_demo: %s\n", err);
        return 2;
    }
    /* Align with the kernel's periods: waking after the deadline the
     * reservation got when it was taken starts a fresh instance. */
    struct timespec pause = {0, 21000000};
    nanosleep(&pause, NULL);
    uint64_t start = now_ns(), last = start, received = 0;
    uint64_t k = 0;
    while (k < 25) {
        uint64_t t = now_ns();
        uint64_t d = t - last;
        uint64_t kt = (t - start) / period;
        if (d <= gap) received += d;
        last = t;
        if (kt != k) {
            punctual_reserve_period_end(received);
            received = 0;
            k = kt;
        }
    }
    struct punctual_report r;
    punctual_reserve_report(&r);
    printf("periods %llu misses %llu received_total_ns %llu charged_total_ns %llu runtime_ns %llu\n",
           (unsigned long long)r.periods, (unsigned long long)r.misses,
           (unsigned long long)r.received_total_ns, (unsigned long long)r.charged_total_ns,
           (unsigned long long)r.runtime_ns);
    if (punctual_reserve_release() != 0) return 1;
    /* The kernel keeps a released reservation's bandwidth until its
     * current deadline has passed; wait one period before asking again. */
    nanosleep(&pause, NULL);

    /* 1 ms of work between +5 ms and +20 ms: fits. */
    int g = punctual_begin_constraint(5000000, 20000000, 1000000);
    if (g == 1) {
        uint64_t s = now_ns();
        while (now_ns() - s < 1000000) { }
        uint64_t taken = 0;
        punctual_end_constraint(&taken);
        printf("constraint granted taken_ns %llu\n", (unsigned long long)taken);
    } else {
        punctual_last_error(err, sizeof err);
        printf("constraint denied: %s\n", err);
    }
    /* 30 ms of work in a 10 ms window: denied up front. */
    g = punctual_begin_constraint(0, 10000000, 30000000);
    punctual_last_error(err, sizeof err);
    printf("impossible constraint %s: %s\n", g == 1 ? "granted" : "denied", err);
    return g == 1 ? 1 : 0;
}
