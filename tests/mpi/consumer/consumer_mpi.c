/* The smallest libdevarray_mpi program: an allreduce of a device array on
 * MPI_COMM_WORLD (any number of ranks, one included). */
#include <devarray_mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  dv_context *ctx = NULL;
  dv_mpi_comm *c = NULL;
  dv_array *a = NULL;
  int64_t n = 4;
  double x = 0;
  int size = 0, rc = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (dv_context_create(NULL, &ctx) == DV_OK &&
      dv_mpi_comm_create(MPI_COMM_WORLD, 0, &c) == DV_OK &&
      dv_device_array(ctx, 1, &n, dv_dtype_get(DV_FLOAT64), NULL, 'C', NULL, &a) == DV_OK &&
      dv_array_memset(a, 0, NULL) == DV_OK &&
      dv_array_set_item(a, (int64_t[]){3}, &(double){1.5}, sizeof(double), NULL) == DV_OK &&
      dv_mpi_allreduce(c, NULL, a, DV_MPI_SUM, NULL) == DV_OK &&
      dv_array_get_item(a, (int64_t[]){3}, &x, sizeof x, NULL) == DV_OK && x == 1.5 * size)
    rc = 0;
  else
    fprintf(stderr, "consumer_mpi: %s\n", dv_last_error());
  printf("consumer_mpi: %g on %d ranks\n", x, size);
  dv_array_release(a);
  dv_mpi_comm_destroy(c);
  dv_context_destroy(ctx);
  MPI_Finalize();
  return rc;
}
