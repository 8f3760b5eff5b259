/* Reads NumPy's answers (from layout_oracle.py) on stdin and checks that
 * devarray's layout functions and slicing agree on every case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"

static int rd(FILE *f, int64_t *v) { return fscanf(f, "%lld", (long long *)v) == 1; }

int main(void) {
  dv_context *ctx;
  dv_config *cfg;
  if (dv_config_create(&cfg) || dv_config_set(cfg, "backend", "host") || dv_context_create(cfg, &ctx)) {
    fprintf(stderr, "no context\n");
    return 1;
  }
  dv_config_destroy(cfg);
  static char buf[1 << 16];
  char kind[4];
  long bad = 0, cases = 0;
  while (scanf("%3s", kind) == 1) {
    int64_t nd, shape[8], strides[8];
    rd(stdin, &nd);
    for (int i = 0; i < nd; i++) rd(stdin, &shape[i]);
    for (int i = 0; i < nd; i++) rd(stdin, &strides[i]);
    cases++;
    if (kind[0] == 'F') {
      int64_t c, f;
      rd(stdin, &c), rd(stdin, &f);
      int dc = dv__layout_is_c((int)nd, shape, strides, 8), df = dv__layout_is_f((int)nd, shape, strides, 8);
      if (dc != c || df != f) bad++, fprintf(stderr, "flags case %ld: got c=%d f=%d want %lld %lld\n", cases, dc, df, (long long)c, (long long)f);
    } else if (kind[0] == 'R') {
      char order[4];
      int64_t nnd, ns[8], view, want[8], got[8];
      if (scanf("%3s", order) != 1) return 2;
      rd(stdin, &nnd);
      for (int i = 0; i < nnd; i++) rd(stdin, &ns[i]);
      rd(stdin, &view);
      int64_t size = 1;
      for (int i = 0; i < nd; i++) size *= shape[i];
      if (view && size)
        for (int i = 0; i < nnd; i++) rd(stdin, &want[i]);
      int ok = dv__layout_reshape_view((int)nd, shape, strides, 8, (int)nnd, ns, order[0], got);
      if (ok != view) bad++, fprintf(stderr, "reshape case %ld: view=%d want %lld\n", cases, ok, (long long)view);
      else if (ok && size)
        for (int i = 0; i < nnd; i++)
          if (ns[i] != 1 && got[i] != want[i]) {
            bad++, fprintf(stderr, "reshape case %ld: stride %d = %lld want %lld\n", cases, i, (long long)got[i], (long long)want[i]);
            break;
          }
    } else {
      int64_t k;
      rd(stdin, &k);
      dv_index idx[8];
      for (int i = 0; i < k; i++) {
        char t[4], a[32], b[32];
        int64_t step;
        if (scanf("%3s", t) != 1) return 2;
        if (t[0] == 'I') {
          int64_t v;
          rd(stdin, &v);
          idx[i] = DV_AT(v);
        } else {
          if (scanf("%31s %31s", a, b) != 2) return 2;
          rd(stdin, &step);
          idx[i] = DV_SLICE(a[0] == 'N' ? DV_NONE : atoll(a), b[0] == 'N' ? DV_NONE : atoll(b), step);
        }
      }
      int64_t ond, os[8], ost[8];
      rd(stdin, &ond);
      for (int i = 0; i < ond; i++) rd(stdin, &os[i]);
      for (int i = 0; i < ond; i++) rd(stdin, &ost[i]);
      int64_t off, wc, wf, wsplit;
      rd(stdin, &off), rd(stdin, &wc), rd(stdin, &wf), rd(stdin, &wsplit);
      dv_array *a, *v;
      if (dv_host_array_wrap(ctx, buf + sizeof buf / 2, (int)nd, shape, dv_dtype_get(DV_FLOAT64), strides, &a)) {
        fprintf(stderr, "wrap failed: %s\n", dv_last_error());
        return 1;
      }
      if (dv_array_slice(a, (int)k, idx, &v)) {
        bad++, fprintf(stderr, "slice case %ld failed: %s\n", cases, dv_last_error());
      } else {
        /* Every stride (empty and one-element dimensions too) and the
         * offset, as NumPy stores them; then what follows from them: the
         * contiguity flags and whether split accepts the view. */
        int mism = dv_array_ndim(v) != ond;
        for (int i = 0; !mism && i < ond; i++)
          mism |= dv_array_shape(v)[i] != os[i] || dv_array_strides(v)[i] != ost[i];
        void *pa, *pv;
        dv_array_host_data(a, &pa), dv_array_host_data(v, &pv);
        mism |= (char *)pv - (char *)pa != off;
        mism |= dv_array_is_c_contiguous(v) != wc || dv_array_is_f_contiguous(v) != wf;
        size_t cnt = 0;
        mism |= (dv_array_split(v, 1, NULL, 0, &cnt) == DV_OK) != wsplit;
        if (mism) {
          bad++;
          fprintf(stderr, "slice case %ld: got shape", cases);
          for (int i = 0; i < dv_array_ndim(v); i++) fprintf(stderr, " %lld", (long long)dv_array_shape(v)[i]);
          fprintf(stderr, " strides");
          for (int i = 0; i < dv_array_ndim(v); i++) fprintf(stderr, " %lld", (long long)dv_array_strides(v)[i]);
          fprintf(stderr, " offset %lld; NumPy: strides", (long long)((char *)pv - (char *)pa));
          for (int i = 0; i < ond; i++) fprintf(stderr, " %lld", (long long)ost[i]);
          fprintf(stderr, " offset %lld\n", (long long)off);
        }
        dv_array_release(v);
      }
      dv_array_release(a);
    }
  }
  dv_context_destroy(ctx);
  printf("%ld cases, %ld disagreements with NumPy\n", cases, bad);
  return bad ? 1 : 0;
}
