DV_KERNEL(s1, DV_ARRAY(int, out), DV_ARRAY(const int, in), int n) {
  DV_BIND(int, out); DV_BIND(const int, in);
  int t = dv_thread_idx(0);
  int acc = 0;
  for (int it = 0; it < 3; it++) {
    int loc = in[t] + it;
    int t = loc * 2;           /* shadows t */
    dv_syncthreads();
    acc += loc + t;
    { int acc = 1000; acc++; (void)acc; }
  }
  dv_syncthreads();
  out[t] = acc;
}
