/* The inner loop of OSU's osu_mbw_mr (OSU Micro-Benchmarks 7.4, osu_mbw_mr.c), re-implemented
 * for one message size so that commbench's pairs streaming at once (`bandwidth --pairs K`) can
 * be set beside it: like with like, same MPI, same placement. benches/mbw_mr.sh runs it.
 *
 *   mpicc -O2 -o /tmp/osu_mbw_mr benches/osu_mbw_mr.c
 *   mpirun -np 2K --bind-to core /tmp/osu_mbw_mr [-W WINDOW] [-i ITERATIONS] [-x SKIP] [SIZE]
 *
 * K = np / 2 pairs: rank r < K sends to r + K (OSU's block placement). SIZE: message size in
 * bytes (default 8, at least 1). -W: messages outstanding per window (default 64, OSU's).
 * -i/-x: timed and untimed iterations of the window (default as OSU: 100 and 10 up to 8192
 * bytes, 20 and 2 above).
 *
 * The loop, as in osu_mbw_mr.c (one send buffer and one receive buffer, page aligned, touched
 * before, as OSU's are):
 *   sender, per iteration:   WINDOW x MPI_Isend(s_buf, SIZE, tag 100) to r + K, MPI_Waitall,
 *                            then MPI_Recv of a 4-byte acknowledgement (tag 101);
 *   receiver, per iteration: WINDOW x MPI_Irecv(r_buf, SIZE, tag 100) from r - K,
 *                            MPI_Waitall, then MPI_Send of the 4-byte acknowledgement.
 * Every rank passes one MPI_Barrier before the loop; each sender starts MPI_Wtime at
 * iteration SKIP and stops it after the last. The figure is OSU 7.4's: the senders' times are
 * summed (MPI_Reduce) and averaged over the pairs, t_mean, and
 *   bandwidth    = SIZE x WINDOW x ITERATIONS x K / t_mean   in MB/s (10^6 B/s),
 *   message rate =        WINDOW x ITERATIONS x K / t_mean   in messages per second
 * (OSU before 7.4 divided by rank 0's own time instead). Beside them, the slowest sender's
 * time gives IMB's makespan figures.
 *
 * Output (rank 0): a comment line, then
 *   SIZE PAIRS WINDOW ITERATIONS MB/s MSG/S MAKESPAN_MB/s MAKESPAN_MSG/S
 */
#include <mpi.h>
#include <stdio.h>

#include "osu_common.h"

static void usage(const char *prog) {
    fprintf(stderr,
            "usage: mpirun -np 2K %s [-W WINDOW] [-i ITERATIONS] [-x SKIP] [SIZE]\n"
            "  SIZE >= 1 bytes (default 8); WINDOW 1..%d (default 64); ITERATIONS >= 1 and\n"
            "  SKIP >= 0 (default 100 and 10 up to %d bytes, 20 and 2 above, as osu_mbw_mr)\n",
            prog, MAX_WINDOW, LARGE_MESSAGE_SIZE);
}

/* Parse the options into *window, *iterations, *skip and *size; 0 when they are good. */
static int parse(int argc, char **argv, long *window, long *iterations, long *skip,
                 long *size) {
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            break;
        }
        if (a[2] != '\0' || i + 1 >= argc) {
            return 1;
        }
        const char *v = argv[++i];
        switch (a[1]) {
        case 'W':
            if ((*window = parse_count(v, 1, MAX_WINDOW)) < 0) {
                return 1;
            }
            break;
        case 'i':
            if ((*iterations = parse_count(v, 1, 1L << 30)) < 0) {
                return 1;
            }
            break;
        case 'x':
            if ((*skip = parse_count(v, 0, 1L << 30)) < 0) {
                return 1;
            }
            break;
        default:
            return 1;
        }
    }
    if (i < argc) {
        if ((*size = parse_count(argv[i], 1, (1L << 31) - 1)) < 0 || i + 1 < argc) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* Every rank parses the same arguments, so all of them agree on whether to go on. */
    long size = 8, window = 64, iterations = -1, skip = -1;
    int bad = nranks < 2 || nranks % 2 != 0;
    bad = bad || parse(argc, argv, &window, &iterations, &skip, &size);
    if (bad) {
        if (rank == 0) {
            usage(argv[0]);
            if (nranks < 2 || nranks % 2 != 0) {
                fprintf(stderr, "  needs an even number of ranks, not %d\n", nranks);
            }
        }
        MPI_Finalize();
        return 2;
    }
    default_counts(size, &iterations, &skip);
    int pairs = nranks / 2;
    int sender = rank < pairs;
    int peer = sender ? rank + pairs : rank - pairs;

    char *s_buf = page_buffer((size_t)size, 'a');
    char *r_buf = page_buffer((size_t)size, 'b');
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)window);
    if (s_buf == NULL || r_buf == NULL || req == NULL) {
        fprintf(stderr, "rank %d: out of memory for buffers of %ld bytes\n", rank, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    double t_start = 0.0, t = 0.0;
    for (long it = 0; it < iterations + skip; it++) {
        if (sender) {
            if (it == skip) {
                t_start = MPI_Wtime();
            }
            for (long j = 0; j < window; j++) {
                MPI_Isend(s_buf, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]);
            }
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            MPI_Recv(r_buf, ACK_BYTES, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            for (long j = 0; j < window; j++) {
                MPI_Irecv(r_buf, (int)size, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &req[j]);
            }
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            MPI_Send(s_buf, ACK_BYTES, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD);
        }
    }
    if (sender) {
        t = MPI_Wtime() - t_start;
    }
    double sum = 0.0, slowest = 0.0;
    MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        double mean = sum / pairs;
        double messages = (double)window * (double)iterations * pairs;
        printf("# size pairs window iterations MB/s msg/s makespan_MB/s makespan_msg/s\n");
        printf("%ld %d %ld %ld %.4f %.2f %.4f %.2f\n", size, pairs, window, iterations,
               (double)size * messages / mean / 1e6, messages / mean,
               (double)size * messages / slowest / 1e6, messages / slowest);
    }

    free(s_buf);
    free(r_buf);
    free(req);
    MPI_Finalize();
    return 0;
}
