/* bench_mpi: libdevarray_mpi against raw MPI on host buffers of the same
 * size, in the same run (ratios), on 2 ranks:
 *
 *   mpirun -np 2 ./bench_mpi [--reps N] [--max-mib M] [--max-strided-mib S] [--small]
 *
 *   pingpong  rank 0 -> 1 -> 0 of one array (4 KiB, 64 KiB, 1 MiB, 16 MiB):
 *             raw MPI_Send/Recv on malloc'd buffers vs dv_mpi_send/recv of
 *             device arrays on each path (host simulator: host path, with and
 *             without the header exchange; the same forced staged, pipelined
 *             and not; OpenCL device arrays (PoCL): staged, pipelined and not)
 *   strided   ping-pong of every other element of a float64 array (16 and
 *             64 MiB of elements): raw MPI with an MPI_Type_vector on malloc'd
 *             buffers vs dv_mpi_send/recv of the host simulator's strided view
 *   allreduce float64 sum: raw MPI_Allreduce vs dv_mpi_allreduce
 *   column    a strided column of a (n, 64) float64 array: MPI derived
 *             datatype vs packing (DV_MPI_FORCE_PACK)
 *   --small   only the host path's ping-pong rows up to 1 MiB and the
 *             strided rows (quick runs while tuning)
 *
 * Each figure is the median of --reps timed repetitions (after one warm-up);
 * a repetition of a message up to 64 KiB is a batch of ping-pongs (the
 * figure is per ping-pong, a round trip); "ratio" is the devarray time over
 * the raw MPI time of the same size, the two timed alternately in one loop
 * (1.00 = no overhead).  Rank 0 prints one line per measurement.
 */
#include <devarray_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                                  \
  do {                                                                             \
    dv_status s_ = (call);                                                         \
    if (s_) {                                                                      \
      fprintf(stderr, "%s: %s: %s\n", #call, dv_status_name(s_), dv_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                \
    }                                                                              \
  } while (0)

static int g_rank, g_reps = 15;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

typedef enum { OP_PINGPONG, OP_ALLREDUCE, OP_STRIDED } op_kind;

/* one repetition with raw MPI on host buffers (OP_STRIDED: every other
 * element of a, n of them, as an MPI vector type) */
static void raw_once(op_kind op, double *a, double *b, int n) {
  MPI_Datatype t = MPI_DOUBLE;
  int count = n;
  if (op == OP_ALLREDUCE) {
    MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return;
  }
  if (op == OP_STRIDED) {
    MPI_Type_vector(n, 1, 2, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    count = 1;
  }
  if (g_rank == 0) {
    MPI_Send(a, count, t, 1, 0, MPI_COMM_WORLD);
    MPI_Recv(a, count, t, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (g_rank == 1) {
    MPI_Recv(a, count, t, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(a, count, t, 0, 0, MPI_COMM_WORLD);
  }
  if (op == OP_STRIDED) MPI_Type_free(&t);
}

static void dv_once(op_kind op, dv_mpi_comm *c, dv_array *a, dv_array *b) {
  if (op == OP_ALLREDUCE) {
    TRY(dv_mpi_allreduce(c, a, b, DV_MPI_SUM, NULL));
  } else if (g_rank == 0) { /* ping-pong and strided: a is the array or view to move */
    TRY(dv_mpi_send(c, a, 1, 0, NULL));
    TRY(dv_mpi_recv(c, a, 1, 0, NULL, NULL));
  } else if (g_rank == 1) {
    TRY(dv_mpi_recv(c, a, 0, 0, NULL, NULL));
    TRY(dv_mpi_send(c, a, 0, 0, NULL));
  }
}

/* devarray and raw MPI of the same size, repetitions interleaved so that
 * both see the same load on a shared machine; *raw gets raw MPI's median. */
static double time_dv(op_kind op, dv_context *ctx, unsigned flags, int n, double *raw) {
  dv_mpi_comm *c;
  TRY(dv_mpi_comm_create(MPI_COMM_WORLD, flags, &c));
  int strided = op == OP_STRIDED;
  int64_t len = strided ? 2 * (int64_t)n : n;
  dv_array *a, *b, *view = NULL;
  TRY(dv_device_array(ctx, 1, &len, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &a));
  TRY(dv_device_array(ctx, 1, &len, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &b));
  TRY(dv_array_memset(a, 0, NULL));
  if (strided) {
    dv_index every_other = DV_SLICE(DV_NONE, DV_NONE, 2);
    TRY(dv_array_slice(a, 1, &every_other, &view));
  }
  double *ra = calloc((size_t)len, sizeof *ra), *rb = calloc((size_t)len, sizeof *rb), t[256],
         tr[256];
  if (!ra || !rb) MPI_Abort(MPI_COMM_WORLD, 1);
  /* a batch of ping-pongs per repetition for small messages (timer and noise) */
  int batch = (size_t)n * sizeof(double) <= ((size_t)64 << 10) ? 200 : 1;
  raw_once(op, ra, rb, n);
  dv_once(op, c, strided ? view : a, b);
  for (int r = 0; r < g_reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < batch; i++) raw_once(op, ra, rb, n);
    tr[r] = (MPI_Wtime() - t0) / batch;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < batch; i++) dv_once(op, c, strided ? view : a, b);
    t[r] = (MPI_Wtime() - t0) / batch;
  }
  free(ra);
  free(rb);
  dv_array_release(view);
  dv_array_release(a);
  dv_array_release(b);
  TRY(dv_mpi_comm_destroy(c));
  *raw = median(tr, g_reps);
  return median(t, g_reps);
}

static double time_column(dv_context *ctx, unsigned flags, int n) {
  dv_mpi_comm *c;
  TRY(dv_mpi_comm_create(MPI_COMM_WORLD, flags, &c));
  TRY(dv_mpi_comm_set_chunk(c, (size_t)1 << 30)); /* one chunk: the derived type applies */
  int64_t shape[2] = {n, 64};
  dv_array *a, *col;
  TRY(dv_device_array(ctx, 2, shape, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &a));
  TRY(dv_array_memset(a, 0, NULL));
  dv_index idx[2] = {DV_ALL, DV_AT(3)};
  TRY(dv_array_slice(a, 2, idx, &col));
  double t[256];
  dv_once(OP_PINGPONG, c, col, NULL);
  for (int r = 0; r < g_reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    dv_once(OP_PINGPONG, c, col, NULL);
    t[r] = MPI_Wtime() - t0;
  }
  dv_array_release(col);
  dv_array_release(a);
  TRY(dv_mpi_comm_destroy(c));
  return median(t, g_reps);
}

static dv_context *open_backend(const char *name) {
  dv_config *cfg;
  dv_context *ctx = NULL;
  TRY(dv_config_create(&cfg));
  TRY(dv_config_set(cfg, "backend", name));
  if (dv_context_create(cfg, &ctx) != DV_OK) ctx = NULL;
  dv_config_destroy(cfg);
  return ctx;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size, max_mib = 16, max_strided_mib = 64, small = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      g_reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc)
      max_mib = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max-strided-mib") && i + 1 < argc)
      max_strided_mib = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--small"))
      small = 1;
  }
  if (g_reps < 1 || g_reps > 256) g_reps = 15;
  if (size != 2) {
    if (g_rank == 0) fprintf(stderr, "bench_mpi: run it on 2 ranks (mpirun -np 2)\n");
    MPI_Finalize();
    return 2;
  }
  dv_context *host = open_backend("host"), *ocl = open_backend("opencl");
  int have_ocl = ocl != NULL, all_ocl = 0;
  MPI_Allreduce(&have_ocl, &all_ocl, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (g_rank == 0)
    printf(
        "# bench_mpi: 2 ranks, median of %d; chunk 1 MiB (DV_MPI_CHUNK); times in microseconds\n"
        "# op        bytes      path                     dv_us     raw_us  ratio  dv_MB/s\n",
        g_reps);
  struct {
    const char *name;
    dv_context **ctx;
    unsigned flags;
  } paths[] = {
      {"host (no copy)", &host, 0},
      {"host, no header", &host, DV_MPI_NO_HEADER},
      {"host->staged pipelined", &host, DV_MPI_FORCE_STAGED},
      {"host->staged one-shot", &host, DV_MPI_FORCE_STAGED | DV_MPI_NO_PIPELINE},
      {"opencl staged pipelined", &ocl, 0},
      {"opencl staged one-shot", &ocl, DV_MPI_NO_PIPELINE},
  };
  if (small) max_mib = 1;
  for (int op = OP_PINGPONG; op <= OP_ALLREDUCE; op++) {
    if (small && op == OP_ALLREDUCE) break;
    for (size_t bytes = op == OP_PINGPONG ? 4096 : 65536; bytes <= ((size_t)max_mib << 20);
         bytes *= 16) { /* 4 KiB (ping-pong), 64 KiB, 1 MiB, 16 MiB */
      int n = (int)(bytes / sizeof(double));
      for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (paths[p].ctx == &ocl && !all_ocl) continue;
        if (small && p > 1) continue;
        double raw = 0, t = time_dv((op_kind)op, *paths[p].ctx, paths[p].flags, n, &raw);
        double moved = op == OP_PINGPONG ? 2.0 * (double)bytes : (double)bytes;
        if (g_rank == 0)
          printf("%-10s %9zu  %-24s %9.1f %9.1f %6.2f %8.1f\n",
                 op == OP_PINGPONG ? "pingpong" : "allreduce", bytes, paths[p].name, t * 1e6,
                 raw * 1e6, t / raw, moved / t / 1e6);
      }
    }
  }
  for (int mib = 16; mib <= max_strided_mib; mib *= 4) {
    int n = (int)(((size_t)mib << 20) / sizeof(double));
    for (size_t p = 0; p < 2; p++) {
      double raw = 0, t = time_dv(OP_STRIDED, host, paths[p].flags, n, &raw);
      if (g_rank == 0)
        printf("%-10s %9zu  %-24s %9.1f %9.1f %6.2f %8.1f\n", "strided", (size_t)mib << 20,
               paths[p].name, t * 1e6, raw * 1e6, t / raw,
               2.0 * (double)((size_t)mib << 20) / t / 1e6);
    }
  }
  for (int n = 256; n <= 65536 && !small; n *= 16) {
    double derived = time_column(host, 0, n), packed = time_column(host, DV_MPI_FORCE_PACK, n);
    if (g_rank == 0)
      printf(
          "column     %9zu  default (derived) %9.1f us | packed %9.1f us | "
          "packed/default %.2f\n",
          (size_t)n * sizeof(double), derived * 1e6, packed * 1e6, packed / derived);
  }
  if (ocl) dv_context_destroy(ocl);
  dv_context_destroy(host);
  MPI_Finalize();
  return 0;
}
