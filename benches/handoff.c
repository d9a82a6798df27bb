/* The physical floor for shm latency: two threads on two cores hand a cache line back and
 * forth through two padded atomics. Prints the one-way hand-off time (median of batches).
 *   cc -O2 -pthread -o /tmp/handoff benches/handoff.c && /tmp/handoff [CPU_A CPU_B] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(128) atomic_long ping;
static _Alignas(128) atomic_long pong;
static int cpu_a = 0, cpu_b = 1;
#define ITERS 100000
#define BATCHES 51

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *echo(void *arg) {
    (void)arg;
    pin(cpu_b);
    for (long i = 1; i <= (long)ITERS * BATCHES; i++) {
        while (atomic_load_explicit(&ping, memory_order_acquire) != i) {}
        atomic_store_explicit(&pong, i, memory_order_release);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc > 2) { cpu_a = atoi(argv[1]); cpu_b = atoi(argv[2]); }
    pthread_t t;
    pthread_create(&t, NULL, echo, NULL);
    pin(cpu_a);
    double ns[BATCHES];
    long i = 0;
    for (int b = 0; b < BATCHES; b++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int k = 0; k < ITERS; k++) {
            i++;
            atomic_store_explicit(&ping, i, memory_order_release);
            while (atomic_load_explicit(&pong, memory_order_acquire) != i) {}
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ns[b] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (2.0 * ITERS);
    }
    pthread_join(t, NULL);
    qsort(ns, BATCHES, sizeof ns[0], cmp);
    printf("cache-line hand-off one-way: median %.1f ns, min %.1f ns (CPUs %d and %d)\n", ns[BATCHES / 2], ns[0], cpu_a, cpu_b);
    return 0;
}
