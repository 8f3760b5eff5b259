DV_KERNEL(s2, DV_ARRAY(int, out), DV_ARRAY(const int, in), int n) {
  DV_BIND(int, out); DV_BIND(const int, in);
  int t = dv_thread_idx(0);
  int acc = 0;
  for (int i = 0, j = 10; i < 4; i++, j--) {
    int w;
    for (int k = 0; k < 5; k++) { if (k == 2) continue; if (k == 4) break; acc += k; }
    do { w = i * j; } while (0);
    dv_syncthreads();
    acc += w + t;
    for (int k = 0; k < 3; k++) { if (k == t % 3) { acc += 100; } }
  }
  int m = 0;
  do { m++; dv_syncthreads(); acc += m; } while (m < acc % 3 + 2 && m < 4);
  out[t] = acc;
}
