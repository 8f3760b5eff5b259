/* mpi_halo: Jacobi iterations of Laplace's equation on an nx x ny grid
 * (top edge 1, other edges 0) split by columns over the ranks of
 * MPI_COMM_WORLD.  Each rank keeps its columns plus one halo column on each
 * side in a device array; every iteration it
 *   - exchanges its edge columns with its neighbours (strided views of the
 *     device arrays, dv_mpi_isend/dv_mpi_irecv; MPI_PROC_NULL at the ends),
 *   - runs the stencil kernel on the device,
 *   - sums its squared updates and adds them over all ranks
 *     (dv_mpi_allreduce on a one-element device array): the residual.
 * With --check, rank 0 then runs the same solver alone (on MPI_COMM_SELF),
 * gathers the distributed grid (dv_mpi_gather of a strided view) and
 * compares both: grids exactly, residuals to 1e-12 (the order of the sums
 * differs).  Exit status 0 when they agree.
 *
 *   mpirun -np 4 ./mpi_halo [--backend host|opencl|cuda] [--nx N] [--ny N]
 *                           [--iters K] [--check]
 */
#include <devarray_mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                                           \
  do {                                                                                      \
    dv_status s_ = (call);                                                                  \
    if (s_) {                                                                               \
      fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, dv_status_name(s_), \
              dv_last_error());                                                             \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                         \
    }                                                                                       \
  } while (0)

/* One Jacobi step on a rank's (nx, w) block whose local column j is global
 * column c0 + j - 1; r gets the squared change of every updated point. */
static const char *const kernel_source =
    "DV_KERNEL(jacobi, DV_ARRAY(const double, u), DV_ARRAY(double, v), DV_ARRAY(double, r),\n"
    "          int nx, int w, int c0, int ny) {\n"
    "  DV_BIND(const double, u);\n"
    "  DV_BIND(double, v);\n"
    "  DV_BIND(double, r);\n"
    "  int j = dv_block_idx(0) * dv_block_dim(0) + dv_thread_idx(0);\n"
    "  int i = dv_block_idx(1) * dv_block_dim(1) + dv_thread_idx(1);\n"
    "  int g = c0 + j - 1;\n"
    "  if (i >= nx || j < 1 || j > w - 2) return;\n"
    "  int k = i * w + j;\n"
    "  if (i == 0 || i == nx - 1 || g == 0 || g == ny - 1) { v[k] = u[k]; r[k] = 0.0; return; }\n"
    "  double x = 0.25 * (u[k - w] + u[k + w] + u[k - 1] + u[k + 1]);\n"
    "  v[k] = x;\n"
    "  r[k] = (x - u[k]) * (x - u[k]);\n"
    "}\n";

typedef struct result {
  dv_array *grid;   /* (nx, w) with halos */
  double *residual; /* iters entries */
} result;

static void solve(dv_context *ctx, dv_kernel *k, MPI_Comm comm, int nx, int ny, int iters,
                  result *out) {
  dv_mpi_comm *c;
  TRY(dv_mpi_comm_create(comm, 0, &c));
  int rank = dv_mpi_comm_rank(c), size = dv_mpi_comm_size(c);
  int ly = ny / size, c0 = rank * ly, w = ly + 2;
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL,
      right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  const dv_dtype *f8 = dv_dtype_get(DV_FLOAT64);
  int64_t shape[2] = {nx, w}, one = 1;
  dv_array *u, *v, *r, *h, *sum;
  TRY(dv_device_array(ctx, 2, shape, f8, NULL, 'C', NULL, &u));
  TRY(dv_device_array(ctx, 2, shape, f8, NULL, 'C', NULL, &v));
  TRY(dv_device_array(ctx, 2, shape, f8, NULL, 'C', NULL, &r));
  TRY(dv_device_array(ctx, 1, &one, f8, NULL, 'C', NULL, &sum));
  TRY(dv_host_array(ctx, 2, shape, f8, NULL, 'C', &h));
  double *hp;
  TRY(dv_array_host_data(h, (void **)&hp));
  for (int i = 0; i < nx; i++)
    for (int j = 0; j < w; j++) hp[i * w + j] = i == 0 ? 1.0 : 0.0;
  TRY(dv_array_copy(u, h, NULL));
  TRY(dv_array_copy(v, h, NULL));
  TRY(dv_array_memset(r, 0, NULL));
  out->residual = calloc((size_t)iters, sizeof(double));
  if (!out->residual) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int it = 0; it < iters; it++) {
    /* halo exchange: columns 1 and w-2 out, columns 0 and w-1 in (strided views) */
    dv_array *col[4];
    int at[4] = {1, w - 2, 0, w - 1};
    for (int q = 0; q < 4; q++) {
      dv_index idx[2] = {DV_ALL, DV_AT(at[q])};
      TRY(dv_array_slice(u, 2, idx, &col[q]));
    }
    dv_mpi_request *req[4];
    TRY(dv_mpi_irecv(c, col[2], left, 1, NULL, &req[0]));
    TRY(dv_mpi_irecv(c, col[3], right, 0, NULL, &req[1]));
    TRY(dv_mpi_isend(c, col[0], left, 0, NULL, &req[2]));
    TRY(dv_mpi_isend(c, col[1], right, 1, NULL, &req[3]));
    TRY(dv_mpi_waitall(4, req));
    for (int q = 0; q < 4; q++) dv_array_release(col[q]);
    /* the stencil on the device */
    dv_launch_config cfg = {
        {(uint32_t)(w + 15) / 16, (uint32_t)(nx + 15) / 16, 1}, {16, 16, 1}, 0, NULL};
    dv_arg args[] = {DV_ARG_ARRAY(u), DV_ARG_ARRAY(v), DV_ARG_ARRAY(r), DV_ARG_I32(nx),
                     DV_ARG_I32(w),   DV_ARG_I32(c0),  DV_ARG_I32(ny)};
    TRY(dv_kernel_launch(k, &cfg, 7, args));
    /* the residual: local sum, then the sum over the ranks */
    TRY(dv_array_copy(h, r, NULL));
    TRY(dv_context_synchronize(ctx));
    double local = 0;
    for (int i = 0; i < nx * w; i++) local += hp[i];
    dv_array *lh;
    TRY(dv_host_array_wrap(ctx, &local, 1, &one, f8, NULL, &lh));
    TRY(dv_array_copy(sum, lh, NULL));
    dv_array_release(lh);
    TRY(dv_mpi_allreduce(c, NULL, sum, DV_MPI_SUM, NULL));
    TRY(dv_array_get_item(sum, (int64_t[]){0}, &out->residual[it], sizeof(double), NULL));
    dv_array *t = u;
    u = v;
    v = t;
  }
  out->grid = u;
  dv_array_release(v);
  dv_array_release(r);
  dv_array_release(h);
  dv_array_release(sum);
  TRY(dv_mpi_comm_destroy(c));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *backend = NULL;
  int nx = 24, ny = 32, iters = 40, check = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc)
      backend = argv[++i];
    else if (!strcmp(argv[i], "--nx") && i + 1 < argc)
      nx = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ny") && i + 1 < argc)
      ny = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--check"))
      check = 1;
    else {
      fprintf(stderr, "usage: %s [--backend B] [--nx N] [--ny N] [--iters K] [--check]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (nx < 3 || ny < 3 || iters < 1 || ny % size) {
    if (rank == 0)
      fprintf(stderr, "mpi_halo: need nx, ny >= 3, iters >= 1 and ny divisible by %d ranks\n",
              size);
    MPI_Finalize();
    return 2;
  }
  dv_config *cfg;
  dv_context *ctx;
  TRY(dv_config_create(&cfg));
  if (backend) TRY(dv_config_set(cfg, "backend", backend));
  dv_status cs = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (cs) { /* every rank sees the same machine: all skip alike */
    if (rank == 0)
      printf("SKIPPED: mpi_halo: backend %s: %s\n", backend ? backend : "default", dv_last_error());
    MPI_Finalize();
    return 77;
  }
  dv_program *p;
  dv_module *m;
  dv_kernel *k;
  TRY(dv_program_create(ctx, "mpi_halo.dvk", kernel_source, &p));
  TRY(dv_program_build(p, 0, &m));
  TRY(dv_module_kernel(m, "jacobi", &k));

  result dist = {0}, single = {0};
  solve(ctx, k, MPI_COMM_WORLD, nx, ny, iters, &dist);
  if (rank == 0)
    printf("mpi_halo: %d x %d grid on %d ranks (%s), %d iterations: residual %.6e -> %.6e\n", nx,
           ny, size, dv_context_backend(ctx), iters, dist.residual[0], dist.residual[iters - 1]);
  int bad = 0;
  if (check) {
    /* gather the owned columns (a strided view) to rank 0 */
    int ly = ny / size;
    dv_array *own, *all = NULL;
    dv_index idx[2] = {DV_ALL, DV_SLICE(1, ly + 1, 1)};
    TRY(dv_array_slice(dist.grid, 2, idx, &own));
    int64_t gshape[3] = {size, nx, ly};
    if (rank == 0) TRY(dv_host_array(ctx, 3, gshape, dv_dtype_get(DV_FLOAT64), NULL, 'C', &all));
    dv_mpi_comm *wc;
    TRY(dv_mpi_comm_create(MPI_COMM_WORLD, 0, &wc));
    TRY(dv_mpi_gather(wc, own, all, 0, NULL));
    dv_mpi_stats st = {.size = sizeof st};
    TRY(dv_mpi_stats_get(wc, &st));
    TRY(dv_mpi_comm_destroy(wc));
    dv_array_release(own);
    if (rank == 0) {
      solve(ctx, k, MPI_COMM_SELF, nx, ny, iters, &single);
      dv_array *g1;
      TRY(dv_copy_to_host(single.grid, NULL, NULL, &g1));
      double *a, *b;
      TRY(dv_array_host_data(all, (void **)&a));
      TRY(dv_array_host_data(g1, (void **)&b));
      for (int r = 0; r < size; r++)
        for (int i = 0; i < nx; i++)
          for (int j = 0; j < ly; j++) {
            double x = a[((size_t)r * nx + i) * ly + j],
                   y = b[(size_t)i * (ny + 2) + r * ly + j + 1];
            if (x != y && bad++ < 5)
              fprintf(stderr, "mpi_halo: point (%d, %d): %g on %d ranks, %g on one\n", i,
                      r * ly + j, x, size, y);
          }
      for (int it = 0; it < iters; it++) {
        double x = dist.residual[it], y = single.residual[it];
        if (fabs(x - y) > 1e-12 * fabs(y) && bad++ < 10)
          fprintf(stderr, "mpi_halo: residual %d: %.17g on %d ranks, %.17g on one\n", it, x, size,
                  y);
      }
      printf("mpi_halo: %s one-rank run (%d points, %d residuals)\n",
             bad ? "DIFFERS from the" : "matches the", nx * ny, iters);
      dv_array_release(g1);
      dv_array_release(single.grid);
      free(single.residual);
      dv_array_release(all);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  }
  dv_array_release(dist.grid);
  free(dist.residual);
  dv_module_release(m);
  dv_program_destroy(p);
  TRY(dv_context_destroy(ctx));
  MPI_Finalize();
  return bad ? 1 : 0;
}
