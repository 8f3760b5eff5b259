/*
 * HIP kernels through devarray's own hipRTC path, with no GPU (issue 26):
 * hipRTC compiles offline.  Every kernel source of the repository
 * (tests/kernel_units.h: tests/kernels, examples, src/kernel -- the copy
 * kernels -- and bench/kernels), assembled exactly as dv_program_build
 * assembles it for a context of the "hip" backend (dv__program_assemble:
 * the signature scan with HIP's rules, the prelude with its argument
 * names), compiled by src/backends/hip/hiprtc.c for the targets
 * hip.gfx_compile covers through hipcc: gfx90a (MI200, CDNA2, wave64),
 * gfx940 (MI300, CDNA3) and gfx1030 (RDNA2, wave32) -- the two kinds of AMD
 * GPU and both wave sizes.  Each result must be an AMDGPU ELF code object
 * with the kernel descriptor `<kernel>.kd` of every kernel the scan found.
 * Also: compile errors with their line, the module-cache image of a code
 * object (HSACO) and the refusal of other backends' images, the HIP
 * driver's kernel operations that need no runtime (target id, limits, the
 * copy kernels' image), the loader's messages.  Skipped (77), naming hipRTC,
 * where it cannot be loaded.
 *
 * ROCm 5.2's hipRTC aborts the process (a double free in libamd_comgr) for
 * a target it does not know, gfx940 among them; the gfx940 pass first runs
 * in a child process and is skipped, by name, where the child dies.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "backends/hip/hip_internal.h"
#include "backends/hip/hiprtc.h"
#include "kernel/kernel_internal.h"
#include "kernel_units.h" /* the kernel sources, their setups, the units */

#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif

static const dv_hiprtc *g_rtc;
static const char *g_targets[3] = {"gfx90a", "gfx1030", "gfx940"};
static size_t g_ntargets = 2; /* 3 where gfx940 works (main) */
static double g_compile_s;
static int g_compiles;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An AMDGPU ELF (64-bit, little-endian, EM_AMDGPU) whose symbol table has
 * `sym`; false with why. */
static bool elf_has_symbol(const void *image, size_t size, const char *sym, const char **why) {
  const unsigned char *b = image;
  const Elf64_Ehdr *eh = image;
  *why = "not an ELF file";
  if (size < sizeof *eh || memcmp(b, ELFMAG, SELFMAG) != 0) return false;
  *why = "not a 64-bit little-endian AMDGPU ELF";
  if (b[EI_CLASS] != ELFCLASS64 || b[EI_DATA] != ELFDATA2LSB || eh->e_machine != EM_AMDGPU) return false;
  *why = "bad section table";
  if (eh->e_shoff > size || eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr)) return false;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
  *why = "no such symbol";
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    if (sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr *str = &sh[sh[i].sh_link];
    if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset || str->sh_offset > size ||
        str->sh_size > size - str->sh_offset)
      continue;
    const Elf64_Sym *s = (const Elf64_Sym *)(b + sh[i].sh_offset);
    const char *names = (const char *)b + str->sh_offset;
    for (size_t j = 0; j < sh[i].sh_size / sizeof *s; j++)
      if (s[j].st_name < str->sh_size &&
          strncmp(names + s[j].st_name, sym, str->sh_size - s[j].st_name) == 0)
        return true;
  }
  return false;
}

static void assert_kernel_symbols(const char *name, const char *target, const dv_hiprtc_out *o,
                                  const dv_ksigs *sigs) {
  for (size_t i = 0; i < sigs->n; i++) {
    char kd[300];
    snprintf(kd, sizeof kd, "%s.kd", sigs->v[i].kernel);
    const char *why = NULL;
    if (!elf_has_symbol(o->image, o->size, kd, &why))
      fail_msg("%s for %s: the code object lacks %s (%s)", name, target, kd, why);
  }
}

/* One unit compiled for targets[0..n): as dv_program_build would. */
static void compile_one(dv_context *ctx, const char *path, const ksetup *su) {
  char *src = read_text_file(path);
  const char *name = base_name(path);
  dv_program *p = setup_program(ctx, name, src, su);
  free(src);
  dv_ksigs sigs;
  char *unit = NULL;
  const char *options = NULL;
  assert_ok(dv__program_assemble(p, "hip", NULL, &sigs, &unit, &options));
  for (size_t t = 0; t < g_ntargets; t++) {
    dv_hiprtc_out o;
    double t0 = now_s();
    dv_status rc = dv__hiprtc_compile(g_rtc, name, unit, g_targets[t], 0, options, &o);
    g_compile_s += now_s() - t0;
    g_compiles++;
    if (su && su->must_fail_at) {
      char at[64]; /* clang's spelling: file:line: */
      snprintf(at, sizeof at, "%s:%d:", su->must_fail_at, su->fail_line);
      if (rc != DV_ERR_COMPILE) fail_msg("%s compiled for %s, but should fail at %s", name, g_targets[t], at);
      if (!o.log || !strstr(o.log, at)) fail_msg("%s: the log lacks %s:\n%s", name, at, o.log ? o.log : "");
      assert_null(o.image);
      if (t == 0) print_message("[   ok   ] %-22s fails as expected at %s\n", name, at);
    } else {
      if (rc != DV_OK)
        fail_msg("%s (defines %s) does not compile for %s: %s\n%s\n(a new source that needs defines "
                 "or constant arrays: add it to g_setups in tests/kernel_units.h)",
                 name, su && su->defines[0] ? su->defines[0] : "none", g_targets[t], dv_last_error(),
                 o.log ? o.log : "(no log)");
      assert_kernel_symbols(name, g_targets[t], &o, &sigs);
      print_message("[   ok   ] %-22s %-30s %-8s %zu kernels, %zu bytes\n", name,
                    su && su->defines[0] ? su->defines[0] : "", g_targets[t], sigs.n, o.size);
    }
    dv__hiprtc_out_free(&o);
  }
  dv__ksigs_free(&sigs);
  dv__free(unit);
  dv_program_destroy(p);
}

static void test_every_kernel_source(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  double t0 = now_s();
  size_t n = for_each_kernel_unit(ctx, compile_one);
  assert_true(n >= 3); /* the glob found the repository's kernels */
  print_message("[   ok   ] %zu sources, %d compiles in %.1f s (hipRTC %.1f s)\n", n, g_compiles,
                now_s() - t0, g_compile_s);
  assert_ok(dv_context_destroy(ctx));
}

/* The signature reader's HIP rules: DV_BACKEND_HIP and hipRTC's own macros
 * are defined, CUDA's are not; options are the program's "hip" ones. */
static void test_hip_rules(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  const char *src =
      "#if defined(DV_BACKEND_HIP) && defined(__HIPCC_RTC__) && !defined(__CUDACC__)\n"
      "DV_KERNEL(on_hip, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = WHICH; }\n"
      "#else\n"
      "DV_KERNEL(elsewhere, DV_ARRAY(float, x)) { DV_BIND(float, x); x[0] = 0; }\n"
      "#endif\n";
  dv_program *p = NULL;
  assert_ok(dv_program_create(ctx, "rules.dvk", src, &p));
  assert_ok(dv_program_options(p, "hip", "-DWHICH=7"));
  assert_ok(dv_program_options(p, "cuda", "-DWHICH=8"));
  assert_status(dv_program_options(p, "rocm", "-O1"), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "hip"));
  dv_ksigs sigs;
  char *unit = NULL;
  const char *options = NULL;
  assert_ok(dv__program_assemble(p, "hip", NULL, &sigs, &unit, &options));
  assert_string_equal(options, "-DWHICH=7");
  assert_int_equal(sigs.n, 1);
  assert_string_equal(sigs.v[0].kernel, "on_hip");
  dv_hiprtc_out o;
  assert_ok(dv__hiprtc_compile(g_rtc, "rules.dvk", unit, "gfx90a", 0, options, &o));
  assert_kernel_symbols("rules.dvk", "gfx90a", &o, &sigs);
  dv__hiprtc_out_free(&o);
  dv__ksigs_free(&sigs);
  dv__free(unit);
  assert_ok(dv__program_assemble(p, "cuda", NULL, &sigs, &unit, &options));
  assert_string_equal(options, "-DWHICH=8");
  assert_int_equal(sigs.n, 1);
  assert_string_equal(sigs.v[0].kernel, "elsewhere");
  dv__ksigs_free(&sigs);
  dv__free(unit);
  dv_program_destroy(p);
  assert_ok(dv_context_destroy(ctx));
}

/* The dialect under hipRTC: HIP, not CUDA; helpers declared without
 * DV_DEVICE are device functions; dynamic shared memory, the wave barrier;
 * the constant buffer and the kernel keep their names in the code object
 * (hipModuleGetGlobal and hipModuleGetFunction find them). */
static void test_dialect_names(void **state) {
  (void)state;
  dv_context *ctx = NULL;
  assert_ok(test_context(&ctx, NULL));
  const char *src = hip_dialect_src;
  dv_program *p = NULL;
  assert_ok(dv_program_create(ctx, "names.dvk", src, &p));
  float tab[4] = {1, 2, 3, 4};
  int64_t four = 4;
  dv_array *h = NULL;
  assert_ok(dv_host_array_wrap(ctx, tab, 1, &four, dv_dtype_get(DV_FLOAT32), NULL, &h));
  assert_ok(dv_program_constant(p, "tab", h));
  dv_array_release(h);
  dv_ksigs sigs;
  char *unit = NULL;
  const char *options = NULL;
  assert_ok(dv__program_assemble(p, "hip", NULL, &sigs, &unit, &options));
  assert_int_equal(sigs.n, 1);
  dv_hiprtc_out o;
  dv_status rc = dv__hiprtc_compile(g_rtc, "names.dvk", unit, "gfx90a", 0, options, &o);
  if (rc) fail_msg("names.dvk: %s\n%s", dv_last_error(), o.log ? o.log : "");
  const char *why;
  if (!elf_has_symbol(o.image, o.size, "hip_names_k.kd", &why)) fail_msg("hip_names_k.kd: %s", why);
  if (!elf_has_symbol(o.image, o.size, "hip_names_k", &why)) fail_msg("hip_names_k: %s", why);
  if (!elf_has_symbol(o.image, o.size, "dv__cbuf", &why)) fail_msg("dv__cbuf: %s", why);
  assert_false(elf_has_symbol(o.image, o.size, "hip_names", &why)); /* whole names only */
  assert_false(elf_has_symbol(o.image, o.size, "no_such_kernel.kd", &why));
  dv__hiprtc_out_free(&o);
  dv__ksigs_free(&sigs);
  dv__free(unit);
  dv_program_destroy(p);
  assert_ok(dv_context_destroy(ctx));
}

/* Wave size per target (64 on CDNA, 32 on RDNA2), a debug build, the
 * compile error's status and log, options passed through. */
static void test_compile_contract(void **state) {
  (void)state;
  const char *h = dv__kernel_header;
  const char *body =
      "\n#line 1 \"w.dvk\"\n"
      "static_assert(dv_wave_size() == EXPECT, \"wave size\");\n"
      "DV_KERNEL(w, DV_ARRAY(dv_u64, out)) { DV_BIND(dv_u64, out); out[0] = dv_wave_ballot(1); }\n";
  size_t n = strlen(h) + strlen(body) + 1;
  char *unit = malloc(n);
  assert_non_null(unit);
  snprintf(unit, n, "%s%s", h, body);
  const struct { const char *target, *opt; dv_status want; } cases[] = {
      {"gfx90a", "-DEXPECT=64", DV_OK},       {"gfx1030", "-DEXPECT=32", DV_OK},
      {"gfx90a", "-DEXPECT=32", DV_ERR_COMPILE}, {"gfx1030", "-DEXPECT=64", DV_ERR_COMPILE},
      {"gfx90a:sramecc+:xnack-", "-DEXPECT=64", DV_OK},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    dv_hiprtc_out o;
    dv_status rc = dv__hiprtc_compile(g_rtc, "w.dvk", unit, cases[i].target, 0, cases[i].opt, &o);
    if (rc != cases[i].want)
      fail_msg("%s %s: %s, expected %s: %s\n%s", cases[i].target, cases[i].opt, dv_status_name(rc),
               dv_status_name(cases[i].want), dv_last_error(), o.log ? o.log : "");
    if (rc) {
      assert_null(o.image);
      assert_non_null(o.log);
      assert_non_null(strstr(o.log, "w.dvk:1:"));
      assert_non_null(strstr(o.log, "wave size"));
      assert_non_null(strstr(dv_last_error(), cases[i].target));
    } else {
      const char *why;
      if (!elf_has_symbol(o.image, o.size, "w.kd", &why)) fail_msg("%s: %s", cases[i].target, why);
    }
    dv__hiprtc_out_free(&o);
  }
  /* An option clang does not know: a compile error naming it, in the log. */
  dv_hiprtc_out bad;
  assert_status(dv__hiprtc_compile(g_rtc, "w.dvk", unit, "gfx90a", 0, "-DEXPECT=64 --dv-no-such-option",
                                   &bad),
                DV_ERR_COMPILE);
  assert_null(bad.image);
  assert_non_null(bad.log);
  assert_non_null(strstr(bad.log, "--dv-no-such-option"));
  dv__hiprtc_out_free(&bad);
  /* A debug build: larger (debug information), still a code object. */
  dv_hiprtc_out a, b;
  assert_ok(dv__hiprtc_compile(g_rtc, "w.dvk", unit, "gfx90a", 0, "-DEXPECT=64", &a));
  assert_ok(dv__hiprtc_compile(g_rtc, "w.dvk", unit, "gfx90a", DV_BUILD_DEBUG, "-DEXPECT=64", &b));
  assert_true(b.size > a.size);
  const char *why;
  assert_true(elf_has_symbol(b.image, b.size, "w.kd", &why));
  dv__hiprtc_out_free(&a);
  dv__hiprtc_out_free(&b);
  free(unit);
}

/* The module cache's image of a code object, and the refusal of another
 * backend's kind. */
static void test_hsaco_image(void **state) {
  (void)state;
  const void *code = NULL;
  size_t size = 0;
  assert_ok(dv__hiprtc_copy_image(g_rtc, "gfx90a", &code, &size));
  void *img = NULL;
  size_t n = 0;
  assert_ok(dv__cu_image_pack(code, size, DV_CU_IMAGE_HSACO, &img, &n));
  assert_int_equal(n, size + 16);
  assert_memory_equal((char *)img + 8, "HSACO\0\0\0", 8);
  const void *payload = NULL;
  size_t psz = 0;
  int kind = -1;
  assert_ok(dv__cu_image_unpack(img, n, &payload, &psz, &kind));
  assert_int_equal(kind, DV_CU_IMAGE_HSACO);
  assert_int_equal(psz, size);
  assert_memory_equal(payload, code, size);
  /* A HIP driver takes it; CUDA's refuses it, and HIP refuses CUBIN and PTX. */
  dv_cu_driver hipdrv = {.vendor = "HIP", .backend = "hip", .kops = &dv__hip_kernel_ops};
  /* CUDA's driver as ../src/backends/cuda/cuda.c declares its images (its
   * table is private to that file). */
  static const struct dv_cu_kernel_ops cuda_ops = {.image_kinds = 1u << DV_CU_IMAGE_CUBIN | 1u << DV_CU_IMAGE_PTX};
  const dv_cu_driver dv__cuda_driver = {.vendor = "CUDA", .backend = "cuda", .kops = &cuda_ops};
  assert_ok(dv__cu_image_accept(&hipdrv, DV_CU_IMAGE_HSACO));
  assert_status(dv__cu_image_accept(&dv__cuda_driver, DV_CU_IMAGE_HSACO), DV_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(dv_last_error(), "HSACO"));
  assert_status(dv__cu_image_accept(&hipdrv, DV_CU_IMAGE_CUBIN), DV_ERR_INVALID_ARGUMENT);
  assert_status(dv__cu_image_accept(&hipdrv, DV_CU_IMAGE_PTX), DV_ERR_INVALID_ARGUMENT);
  assert_ok(dv__cu_image_accept(&dv__cuda_driver, DV_CU_IMAGE_CUBIN));
  assert_ok(dv__cu_image_accept(&dv__cuda_driver, DV_CU_IMAGE_PTX));
  /* A code object that is not an ELF file, an unknown kind. */
  ((unsigned char *)img)[16] = 'X';
  assert_status(dv__cu_image_unpack(img, n, &payload, &psz, &kind), DV_ERR_INVALID_ARGUMENT);
  dv__free(img);
  assert_status(dv__cu_image_pack(code, size, 3, &img, &n), DV_ERR_INVALID_ARGUMENT);
  assert_null(img);
}

/* The HIP driver's kernel operations on a context state without a runtime. */
static void test_kernel_ops(void **state) {
  (void)state;
  const struct dv_cu_kernel_ops *ko = &dv__hip_kernel_ops;
  dv_cu_driver hipdrv = {.vendor = "HIP", .backend = "hip", .kops = ko};
  cu_state *st = calloc(1, sizeof *st + sizeof(dv_hip_ctx));
  assert_non_null(st);
  st->drv = &hipdrv;
  st->drv_state = st + 1;
  st->driver_version = 50221153;
  assert_int_equal(ko->image_kinds, 1u << DV_CU_IMAGE_HSACO);
  assert_true(ko->no_shared_optin);
  /* No gfx target: no compiler, said so. */
  char id[512];
  assert_status(ko->target_id(st, id, sizeof id), DV_ERR_NO_COMPILER);
  assert_non_null(strstr(dv_last_error(), "hip_arch"));
  snprintf(DV_HIP_CTX(st)->arch, sizeof DV_HIP_CTX(st)->arch, "sm_90");
  assert_status(ko->target_id(st, id, sizeof id), DV_ERR_NO_COMPILER);
  snprintf(DV_HIP_CTX(st)->arch, sizeof DV_HIP_CTX(st)->arch, "gfx90a:sramecc+:xnack-");
  assert_ok(ko->target_id(st, id, sizeof id));
  char want[256];
  snprintf(want, sizeof want, "hip gfx90a:sramecc+:xnack- runtime 50221153 hiprtc %d.%d %s",
           g_rtc->major, g_rtc->minor, g_rtc->file);
  assert_string_equal(id, want);
  /* Another target, another key. */
  snprintf(DV_HIP_CTX(st)->arch, sizeof DV_HIP_CTX(st)->arch, "gfx1030");
  char id2[512];
  assert_ok(ko->target_id(st, id2, sizeof id2));
  assert_string_not_equal(id, id2);
  /* Compile through the hook: a code object of the target. */
  dv_build_req req = {"k.dvk", NULL, "-DKVAL=3", 0, 0, NULL};
  char *unit = NULL;
  {
    const char *body = "\n#line 1 \"k.dvk\"\nDV_KERNEL(k, DV_ARRAY(int, x)) { DV_BIND(int, x); x[0] = KVAL; }\n";
    size_t n = strlen(dv__kernel_header) + strlen(body) + 1;
    unit = malloc(n);
    assert_non_null(unit);
    snprintf(unit, n, "%s%s", dv__kernel_header, body);
  }
  req.source = unit;
  void *img = NULL;
  size_t n = 0;
  char *log = NULL;
  int kind = -1;
  assert_ok(ko->compile(st, &req, &img, &n, &kind, &log));
  assert_int_equal(kind, DV_CU_IMAGE_HSACO);
  const char *why;
  assert_true(elf_has_symbol(img, n, "k.kd", &why));
  dv__free(img);
  dv__free(log);
  req.options = ""; /* KVAL undefined: a compile error with the log */
  assert_status(ko->compile(st, &req, &img, &n, &kind, &log), DV_ERR_COMPILE);
  assert_null(img);
  assert_non_null(log);
  assert_non_null(strstr(log, "k.dvk:1:"));
  dv__free(log);
  free(unit);
  /* The copy kernels: every word size and index width, compiled once per target. */
  const void *c1 = NULL, *c2 = NULL;
  size_t s1 = 0, s2 = 0;
  assert_ok(ko->copy_image(st, &c1, &s1, &kind));
  assert_int_equal(kind, DV_CU_IMAGE_HSACO);
  assert_ok(ko->copy_image(st, &c2, &s2, &kind));
  assert_ptr_equal(c1, c2);
  assert_int_equal(s1, s2);
  static const char *const words[] = {"w1", "w2", "w4", "w8", "w16"};
  for (int w = 0; w < 5; w++)
    for (int i = 0; i < 2; i++) {
      char kd[64];
      snprintf(kd, sizeof kd, "dv_copy_%s_%s.kd", words[w], i ? "i64" : "i32");
      if (!elf_has_symbol(c1, s1, kd, &why)) fail_msg("copy kernels: %s: %s", kd, why);
    }
  /* Limits: LDS 64 KiB where the runtime says nothing, no opt-in beyond
   * the per-block size, the device's wave size kept. */
  dv_klimits L;
  memset(&L, 0, sizeof L);
  L.wave_size = 64;
  L.max_shared_per_block_optin = 1 << 20;
  ko->limits(st, &L);
  assert_int_equal(L.max_shared_per_block, 65536);
  assert_int_equal(L.max_shared_per_block_optin, 65536);
  assert_int_equal(L.wave_size, 64);
  L.wave_size = 32;
  L.max_shared_per_block = 32768;
  ko->limits(st, &L);
  assert_int_equal(L.wave_size, 32);
  assert_int_equal(L.max_shared_per_block_optin, 32768);
  free(st);
}

static void test_loader(void **state) {
  (void)state;
  const dv_hiprtc *r = NULL;
  assert_status(dv__hiprtc_load("libdv_no_such_hiprtc.so", NULL, &r), DV_ERR_NO_COMPILER);
  assert_null(r);
  assert_non_null(strstr(dv_last_error(), "libdv_no_such_hiprtc.so"));
  assert_non_null(strstr(dv_last_error(), "hiprtc_library"));
  /* A library without hipRTC's entry points. */
  assert_status(dv__hiprtc_load("libm.so.6", NULL, &r), DV_ERR_NO_COMPILER);
  assert_non_null(strstr(dv_last_error(), "hiprtcGetErrorString"));
  /* The same request, the same record. */
  const dv_hiprtc *a = NULL, *b = NULL;
  assert_ok(dv__hiprtc_load("", NULL, &a));
  assert_ok(dv__hiprtc_load(NULL, NULL, &b));
  assert_ptr_equal(a, b);
  char proc[16];
  assert_true(dv__hiprtc_processor("gfx90a:sramecc+:xnack-", proc, sizeof proc));
  assert_string_equal(proc, "gfx90a");
  assert_true(dv__hiprtc_processor("gfx1030", proc, sizeof proc));
  assert_string_equal(proc, "gfx1030");
  assert_false(dv__hiprtc_processor("", proc, sizeof proc));
  assert_false(dv__hiprtc_processor("gfx", proc, sizeof proc));
  assert_false(dv__hiprtc_processor("sm_90", proc, sizeof proc));
  assert_false(dv__hiprtc_processor("gfx9-0a", proc, sizeof proc));
}

/* Whether hipRTC survives a compile for `target` (in a child: ROCm 5.2's
 * aborts the process for targets it does not know). */
static bool target_survives(const char *target) {
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2); /* the abort's report is not this test's output */
    const void *img = NULL;
    size_t n = 0;
    _exit(dv__hiprtc_copy_image(g_rtc, target, &img, &n) == DV_OK ? 0 : 1);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void) {
  if (dv__hiprtc_load(NULL, NULL, &g_rtc) != DV_OK) {
    printf("hip.rtc: skipped: hipRTC cannot be loaded: %s\n", dv_last_error());
    return 77;
  }
  printf("hipRTC %d.%d from %s\n", g_rtc->major, g_rtc->minor, g_rtc->file);
  fflush(stdout);
  if (target_survives("gfx940"))
    g_ntargets = 3;
  else
    printf("hip.rtc: gfx940 skipped: this hipRTC (%s) aborts or fails compiling for it (ROCm 5.2's "
           "does not know gfx940; hip.gfx_compile covers it through hipcc)\n", g_rtc->file);
  g_backend = "host";
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loader),
      cmocka_unit_test(test_compile_contract),
      cmocka_unit_test(test_hip_rules),
      cmocka_unit_test(test_dialect_names),
      cmocka_unit_test(test_hsaco_image),
      cmocka_unit_test(test_kernel_ops),
      cmocka_unit_test(test_every_kernel_source),
  };
  return cmocka_run_group_tests_name("hip_rtc", tests, NULL, NULL);
}
