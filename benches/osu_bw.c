/* The inner loop of OSU's osu_bw (OSU Micro-Benchmarks, osu_bw.c), re-implemented for one
 * message size so that commbench's bandwidth pattern can be set beside it: like with like,
 * same MPI, same placement. benches/window_shape.sh runs it.
 *
 *   mpicc -O2 -o /tmp/osu_bw benches/osu_bw.c
 *   mpirun -np 2 --bind-to core /tmp/osu_bw [-b single|multiple] [-W WINDOW]
 *                                           [-i ITERATIONS] [-x SKIP] [SIZE]
 *
 * SIZE: message size in bytes (default 1048576, at least 1). -W: messages outstanding per
 * window (default 64, OSU's). -i/-x: timed and untimed iterations of the window (default as
 * OSU: 100 and 10 up to 8192 bytes, 20 and 2 above). -b: single (default, as OSU) posts the
 * same send buffer and the same receive buffer for every message of a window; multiple gives
 * each outstanding message its own buffer on both sides, as OSU's -b multiple does.
 *
 * The loop, as in osu_bw.c:
 *   rank 0, per iteration: WINDOW x MPI_Isend(s_buf, SIZE, tag 100), MPI_Waitall, then
 *           MPI_Recv of a 4-byte acknowledgement (tag 101);
 *   rank 1, per iteration: WINDOW x MPI_Irecv(r_buf, SIZE, tag 100), MPI_Waitall, then
 *           MPI_Send of the 4-byte acknowledgement.
 * Rank 0 starts MPI_Wtime at iteration SKIP and stops it after the last, after one
 * MPI_Barrier before the loop; buffers are page aligned (getpagesize) and touched before
 * ('a' to send, 'b' to receive), as OSU's are. The figure is OSU's: an average over the timed
 * iterations, bandwidth = SIZE x ITERATIONS x WINDOW / time in MB/s (10^6 B/s), and beside it
 * the same time per message, time / (ITERATIONS x WINDOW), in microseconds.
 *
 * Output (rank 0): a comment line, then
 *   SIZE WINDOW BUFFERS ITERATIONS MB/s US_PER_MESSAGE
 */
#include <mpi.h>
#include <stdio.h>

#include "osu_common.h"

static void usage(const char *prog) {
    fprintf(stderr,
            "usage: mpirun -np 2 %s [-b single|multiple] [-W WINDOW] [-i ITERATIONS] "
            "[-x SKIP] [SIZE]\n"
            "  SIZE >= 1 bytes (default 1048576); WINDOW 1..%d (default 64); ITERATIONS >= 1 "
            "and SKIP >= 0\n"
            "  (default 100 and 10 up to %d bytes, 20 and 2 above, as osu_bw)\n",
            prog, MAX_WINDOW, LARGE_MESSAGE_SIZE);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* Every rank parses the same arguments, so all of them agree on whether to go on. */
    long size = 1048576, window = 64, iterations = -1, skip = -1;
    int multiple = 0, bad = nranks != 2;
    int i = 1;
    for (; i < argc && !bad; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            break;
        }
        if (a[2] != '\0' || i + 1 >= argc) {
            bad = 1;
            break;
        }
        const char *v = argv[++i];
        switch (a[1]) {
        case 'b':
            if (strcmp(v, "single") == 0) {
                multiple = 0;
            } else if (strcmp(v, "multiple") == 0) {
                multiple = 1;
            } else {
                bad = 1;
            }
            break;
        case 'W':
            bad = (window = parse_count(v, 1, MAX_WINDOW)) < 0;
            break;
        case 'i':
            bad = (iterations = parse_count(v, 1, 1L << 30)) < 0;
            break;
        case 'x':
            bad = (skip = parse_count(v, 0, 1L << 30)) < 0;
            break;
        default:
            bad = 1;
        }
    }
    if (!bad && i < argc) {
        bad = (size = parse_count(argv[i], 1, (1L << 31) - 1)) < 0 || i + 1 < argc;
    }
    if (bad) {
        if (rank == 0) {
            usage(argv[0]);
            if (nranks != 2) {
                fprintf(stderr, "  needs exactly 2 ranks, not %d\n", nranks);
            }
        }
        MPI_Finalize();
        return 2;
    }
    default_counts(size, &iterations, &skip);

    /* single: bufs[0] only; multiple: one buffer per outstanding message. Rank 0 sends from
     * its buffers and receives the acknowledgement into ack; rank 1 the other way round. */
    long nbufs = multiple ? window : 1;
    char **bufs = calloc((size_t)nbufs, sizeof(char *));
    char *ack = page_buffer(ACK_BYTES, rank == 0 ? 'b' : 'a');
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)window);
    int oom = bufs == NULL || ack == NULL || req == NULL;
    for (long b = 0; b < nbufs && !oom; b++) {
        bufs[b] = page_buffer((size_t)size, rank == 0 ? 'a' : 'b');
        oom = bufs[b] == NULL;
    }
    if (oom) {
        fprintf(stderr, "rank %d: out of memory for %ld buffers of %ld bytes\n", rank, nbufs,
                size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    double t_start = 0.0, t_end = 0.0;
    for (long it = 0; it < iterations + skip; it++) {
        if (rank == 0) {
            if (it == skip) {
                t_start = MPI_Wtime();
            }
            for (long j = 0; j < window; j++) {
                MPI_Isend(bufs[multiple ? j : 0], (int)size, MPI_CHAR, 1, TAG_DATA,
                          MPI_COMM_WORLD, &req[j]);
            }
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, ACK_BYTES, MPI_CHAR, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (long j = 0; j < window; j++) {
                MPI_Irecv(bufs[multiple ? j : 0], (int)size, MPI_CHAR, 0, TAG_DATA,
                          MPI_COMM_WORLD, &req[j]);
            }
            MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
            MPI_Send(ack, ACK_BYTES, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD);
        }
    }
    t_end = MPI_Wtime();

    if (rank == 0) {
        double t = t_end - t_start;
        double messages = (double)iterations * (double)window;
        printf("# size window buffers iterations MB/s us_per_message\n");
        printf("%ld %ld %s %ld %.2f %.3f\n", size, window, multiple ? "multiple" : "single",
               iterations, (double)size / 1e6 * messages / t, t / messages * 1e6);
    }

    for (long b = 0; b < nbufs; b++) {
        free(bufs[b]);
    }
    free(bufs);
    free(ack);
    free(req);
    MPI_Finalize();
    return 0;
}
