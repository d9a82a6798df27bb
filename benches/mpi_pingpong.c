/* The plainest MPI ping-pong loop: the reference against which benches/overhead.sh measures
 * the harness overhead of commbench's mpi backend.
 *
 *   mpicc -O2 -o /tmp/mpi_pingpong benches/mpi_pingpong.c
 *   mpirun -np 2 --bind-to core /tmp/mpi_pingpong [BYTES [NPP [TRIALS]]]
 *
 * BYTES: message size (default 8, may be 0); NPP: ping-pongs per timed trial (default 50);
 * TRIALS: timed trials (default 10000). Runs with exactly two ranks: rank 0 sends and times,
 * rank 1 echoes.
 *
 * Each trial is a barrier followed by NPP blocking MPI_Send/MPI_Recv round trips timed with
 * MPI_Wtime; the trial's one-way time is its duration / (2 x NPP). Rank 0 prints one number,
 * the median one-way time over the trials in microseconds. Nothing else is done: no clock
 * characterisation, no handshake, no filtering, no statistics beyond the median, so whatever
 * commbench adds on top of this loop is harness overhead.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG 1
#define WARMUP 100

/* Parse a non-negative decimal integer no larger than max; -1 when the text is not one. */
static long parse_count(const char *s, long max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 0 || v > max) {
        return -1;
    }
    return v;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One round trip: rank 0 sends and waits for the echo, rank 1 echoes. */
static void round_trip(int rank, char *buf, int bytes) {
    if (rank == 0) {
        MPI_Send(buf, bytes, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
        MPI_Recv(buf, bytes, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, bytes, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, bytes, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Every rank parses the same arguments, so all of them agree on whether to go on. */
    long bytes = argc > 1 ? parse_count(argv[1], 1L << 30) : 8;
    long npp = argc > 2 ? parse_count(argv[2], 1L << 30) : 50;
    long trials = argc > 3 ? parse_count(argv[3], 1L << 26) : 10000;
    if (argc > 4 || bytes < 0 || npp < 1 || trials < 1 || size != 2) {
        if (rank == 0) {
            fprintf(stderr,
                    "usage: mpirun -np 2 %s [BYTES [NPP [TRIALS]]]\n"
                    "  BYTES >= 0 (default 8), NPP >= 1 (default 50), TRIALS >= 1 (default "
                    "10000)\n",
                    argv[0]);
            if (size != 2) {
                fprintf(stderr, "  needs exactly 2 ranks, not %d\n", size);
            }
        }
        MPI_Finalize();
        return 2;
    }

    char *buf = calloc(bytes > 0 ? (size_t)bytes : 1, 1);
    double *one_way_us = malloc(sizeof(double) * (size_t)trials);
    if (buf == NULL || one_way_us == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Warm-up: connections, caches and the library's first-use paths. */
    for (int w = 0; w < WARMUP; w++) {
        round_trip(rank, buf, (int)bytes);
    }

    for (long k = 0; k < trials; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < npp; i++) {
            round_trip(rank, buf, (int)bytes);
        }
        one_way_us[k] = (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)npp);
    }

    if (rank == 0) {
        qsort(one_way_us, (size_t)trials, sizeof(double), cmp_double);
        double median = trials % 2 ? one_way_us[trials / 2]
                                   : (one_way_us[trials / 2 - 1] + one_way_us[trials / 2]) / 2.0;
        printf("%.4f\n", median);
    }

    free(one_way_us);
    free(buf);
    MPI_Finalize();
    return 0;
}
