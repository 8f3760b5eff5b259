/*
 * Reads AMDGPU code objects for the HIP test double (hip_elf.h): kernels
 * are the OBJECT symbols `X.kd` (64-byte kernel descriptors) whose X is a
 * FUNC symbol; module globals (__constant__, __device__ variables) are the
 * other OBJECT symbols with a size; the metadata note (msgpack) gives the
 * kernels' explicit argument sizes.  From the ELF-64 specification and the
 * LLVM AMDGPU usage notes (kernel descriptor layout); written for the
 * double, nothing copied.
 */
#include "hip_elf.h"

#include <stdlib.h>
#include <string.h>

#define EM_AMDGPU 0xE0
#define SHT_SYMTAB 2
#define SHT_NOTE 7
#define SHT_NOBITS 8
#define SHT_DYNSYM 11
#define STT_OBJECT 1
#define STT_FUNC 2

typedef struct img {
  const unsigned char *p;
  uint64_t n; /* extent */
} img;

static int in(const img *m, uint64_t off, uint64_t len) { return off <= m->n && len <= m->n - off; }
static uint16_t r16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t r32(const unsigned char *p) { return (uint32_t)r16(p) | (uint32_t)r16(p + 2) << 16; }
static uint64_t r64(const unsigned char *p) { return (uint64_t)r32(p) | (uint64_t)r32(p + 4) << 32; }

typedef struct shdr {
  uint32_t name, type, link;
  uint64_t addr, off, size, entsize;
} shdr;

static shdr sec(const img *m, uint64_t shoff, unsigned i) {
  const unsigned char *h = m->p + shoff + (uint64_t)i * 64;
  shdr s = {r32(h), r32(h + 4), r32(h + 40), r64(h + 16), r64(h + 24), r64(h + 32), r64(h + 56)};
  return s;
}

/* A NUL-terminated name at strtab offset o, inside the string section. */
static const char *str_at(const img *m, const shdr *st, uint32_t o) {
  if (o >= st->size) return NULL;
  const char *s = (const char *)m->p + st->off + o;
  return memchr(s, 0, st->size - o) ? s : NULL;
}

static int fail(const char **why, const char *msg) {
  if (why) *why = msg;
  return HIPELF_INVALID;
}

/* The file bytes behind virtual address a..a+len in section s (NULL: none). */
static const unsigned char *vbytes(const img *m, const shdr *s, uint64_t a, uint64_t len) {
  if (s->type == SHT_NOBITS || a < s->addr || a - s->addr > s->size || len > s->size - (a - s->addr)) return NULL;
  uint64_t off = s->off + (a - s->addr);
  return in(m, off, len) ? m->p + off : NULL;
}

/* ---- the metadata note: msgpack (msgpack.org's format), read with bounds ---- */

enum { MP_ERR, MP_INT, MP_STR, MP_ARR, MP_MAP, MP_OTHER };
#define MP_DEPTH 32

typedef struct mp {
  const unsigned char *p;
  uint64_t n, pos;
} mp;

static int take(mp *m, uint64_t k, const unsigned char **out) {
  if (k > m->n - m->pos) return 0;
  *out = m->p + m->pos;
  m->pos += k;
  return 1;
}

/* A big-endian number of w bytes. */
static int be(mp *m, unsigned w, uint64_t *v) {
  const unsigned char *b;
  if (!take(m, w, &b)) return 0;
  *v = 0;
  for (unsigned i = 0; i < w; i++) *v = *v << 8 | b[i];
  return 1;
}

/* One value's head: MP_INT (unsigned, *v its value), MP_STR (*v bytes at
 * *s), MP_ARR / MP_MAP (*v entries follow), MP_OTHER (whole: nil, bool,
 * negative or signed integer, float, bin, ext), MP_ERR (truncated, 0xc1). */
static int mp_head(mp *m, uint64_t *v, const unsigned char **s) {
  const unsigned char *b;
  uint64_t len;
  if (!take(m, 1, &b)) return MP_ERR;
  unsigned c = b[0];
  if (c <= 0x7f) return *v = c, MP_INT;
  if (c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) return MP_OTHER;
  if ((c & 0xf0) == 0x80) return *v = c & 0xf, MP_MAP;
  if ((c & 0xf0) == 0x90) return *v = c & 0xf, MP_ARR;
  if ((c & 0xe0) == 0xa0) return *v = c & 0x1f, take(m, *v, s) ? MP_STR : MP_ERR;
  if (c >= 0xc4 && c <= 0xc6) return be(m, 1u << (c - 0xc4), &len) && take(m, len, s) ? MP_OTHER : MP_ERR;
  if (c >= 0xc7 && c <= 0xc9) return be(m, 1u << (c - 0xc7), &len) && len < UINT64_MAX && take(m, len + 1, s) ? MP_OTHER : MP_ERR;
  if (c == 0xca || c == 0xcb) return take(m, c == 0xca ? 4 : 8, s) ? MP_OTHER : MP_ERR;
  if (c >= 0xcc && c <= 0xcf) return be(m, 1u << (c - 0xcc), v) ? MP_INT : MP_ERR;
  if (c >= 0xd0 && c <= 0xd3) return take(m, 1u << (c - 0xd0), s) ? MP_OTHER : MP_ERR;
  if (c >= 0xd4 && c <= 0xd8) return take(m, 1 + (1u << (c - 0xd4)), s) ? MP_OTHER : MP_ERR;
  if (c >= 0xd9 && c <= 0xdb) return be(m, 1u << (c - 0xd9), v) && take(m, *v, s) ? MP_STR : MP_ERR;
  if (c == 0xdc || c == 0xdd) return be(m, c == 0xdc ? 2 : 4, v) ? MP_ARR : MP_ERR;
  if (c == 0xde || c == 0xdf) return be(m, c == 0xde ? 2 : 4, v) ? MP_MAP : MP_ERR;
  return MP_ERR;
}

/* Entries that cannot all be there (each takes a byte at least): refused
 * before any loop over them. */
static int room(const mp *m, int t, uint64_t v) {
  uint64_t k = t == MP_MAP ? 2 * v : v;
  return k <= m->n - m->pos;
}

static int mp_skip(mp *m, int depth) {
  uint64_t v = 0;
  const unsigned char *s;
  int t = mp_head(m, &v, &s);
  if (t == MP_ERR || depth > MP_DEPTH) return 0;
  if (t == MP_ARR || t == MP_MAP) {
    if (!room(m, t, v)) return 0;
    for (uint64_t i = 0; i < (t == MP_MAP ? 2 * v : v); i++)
      if (!mp_skip(m, depth + 1)) return 0;
  }
  return 1;
}

static int is_key(const unsigned char *s, uint64_t len, const char *k) {
  return len == strlen(k) && !memcmp(s, k, (size_t)len);
}

/* One argument's map: its size, and whether it is explicit. */
static int read_arg(mp *m, uint32_t *size, int *explicit_arg) {
  uint64_t nf, v, kl;
  const unsigned char *s, *k;
  int t = mp_head(m, &nf, &s), have_size = 0;
  if (t != MP_MAP || !room(m, t, nf)) return 0;
  *explicit_arg = 1;
  for (uint64_t i = 0; i < nf; i++) {
    if (mp_head(m, &kl, &k) != MP_STR) return 0;
    if (is_key(k, kl, ".size")) {
      if (mp_head(m, &v, &s) != MP_INT || v > UINT32_MAX) return 0;
      *size = (uint32_t)v, have_size = 1;
    } else if (is_key(k, kl, ".value_kind")) {
      if (mp_head(m, &v, &s) != MP_STR) return 0;
      *explicit_arg = !(v >= 7 && !memcmp(s, "hidden_", 7));
    } else if (!mp_skip(m, 2)) {
      return 0;
    }
  }
  return have_size;
}

/* One kernel's map: its arguments and registers, given to the kernel of
 * that name (metadata for a kernel the symbols do not have is ignored). */
static int read_kernel(mp *m, hipelf_module *out) {
  uint64_t nf, v, kl;
  const unsigned char *s, *k, *name = NULL;
  uint64_t name_len = 0;
  hipelf_kernel tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.nargs = -1;
  int t = mp_head(m, &nf, &s);
  if (t != MP_MAP || !room(m, t, nf)) return 0;
  for (uint64_t i = 0; i < nf; i++) {
    if (mp_head(m, &kl, &k) != MP_STR) return 0;
    if (is_key(k, kl, ".name")) {
      if (mp_head(m, &name_len, &name) != MP_STR) return 0;
    } else if (is_key(k, kl, ".vgpr_count")) {
      if (mp_head(m, &v, &s) != MP_INT) return 0;
      tmp.vgprs = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    } else if (is_key(k, kl, ".args")) {
      uint64_t na;
      t = mp_head(m, &na, &s);
      if (t != MP_ARR || !room(m, t, na)) return 0;
      tmp.nargs = 0;
      for (uint64_t j = 0; j < na; j++) {
        uint32_t size = 0;
        int explicit_arg = 1;
        if (!read_arg(m, &size, &explicit_arg)) return 0;
        if (!explicit_arg) continue;
        if (tmp.nargs == HIPELF_MAX_ARGS) return 0;
        tmp.arg_size[tmp.nargs++] = size;
      }
    } else if (!mp_skip(m, 1)) {
      return 0;
    }
  }
  for (int i = 0; name && i < out->nkernels; i++)
    if (is_key(name, name_len, out->kernels[i].name)) {
      out->kernels[i].nargs = tmp.nargs, out->kernels[i].vgprs = tmp.vgprs;
      memcpy(out->kernels[i].arg_size, tmp.arg_size, sizeof tmp.arg_size);
    }
  return 1;
}

static int read_metadata(const unsigned char *d, uint64_t n, hipelf_module *out) {
  mp m = {d, n, 0};
  uint64_t nf, kl, nk;
  const unsigned char *s, *k;
  int t = mp_head(&m, &nf, &s);
  if (t != MP_MAP || !room(&m, t, nf)) return 0;
  for (uint64_t i = 0; i < nf; i++) {
    if (mp_head(&m, &kl, &k) != MP_STR) return 0;
    if (!is_key(k, kl, "amdhsa.kernels")) {
      if (!mp_skip(&m, 1)) return 0;
      continue;
    }
    t = mp_head(&m, &nk, &s);
    if (t != MP_ARR || !room(&m, t, nk)) return 0;
    for (uint64_t j = 0; j < nk; j++)
      if (!read_kernel(&m, out)) return 0;
  }
  return 1;
}

/* The notes of a SHT_NOTE section: "AMDGPU" NT_AMDGPU_METADATA (32) read. */
static int read_notes(const img *im, const shdr *sec_, hipelf_module *out) {
  uint64_t pos = 0, n = sec_->size;
  const unsigned char *p = im->p + sec_->off;
  while (n - pos >= 12) {
    uint64_t namesz = r32(p + pos), descsz = r32(p + pos + 4);
    uint32_t type = r32(p + pos + 8);
    pos += 12;
    uint64_t name_pad = (namesz + 3) & ~(uint64_t)3, desc_pad = (descsz + 3) & ~(uint64_t)3;
    if (name_pad > n - pos || desc_pad > n - pos - name_pad) return 0;
    const unsigned char *name = p + pos, *desc = p + pos + name_pad;
    pos += name_pad + desc_pad;
    if (type == 32 && namesz == 7 && !memcmp(name, "AMDGPU", 7) && !read_metadata(desc, descsz, out)) return 0;
  }
  return 1;
}

int hipelf_read(const void *image, hipelf_module *out, const char **why) {
  memset(out, 0, sizeof *out);
  if (why) *why = NULL;
  if (!image) return fail(why, "no image");
  const unsigned char *p = image;
  static const unsigned char magic[4] = {0x7f, 'E', 'L', 'F'};
  for (int i = 0; i < 4; i++)
    if (p[i] != magic[i]) return fail(why, "not an ELF image");
  if (p[4] != 2 || p[5] != 1) return fail(why, "not a 64-bit little-endian ELF");
  if (r16(p + 18) != EM_AMDGPU) return fail(why, "not an AMDGPU code object (e_machine is not EM_AMDGPU)");
  uint64_t shoff = r64(p + 40);
  unsigned shentsize = r16(p + 58), shnum = r16(p + 60);
  if (r16(p + 52) != 64 || shentsize != 64 || !shnum || shoff < 64) return fail(why, "bad ELF header");
  if (shoff > HIPELF_MAX_IMAGE || (uint64_t)shnum * 64 > HIPELF_MAX_IMAGE - shoff)
    return fail(why, "section headers past the image's largest size");
  img m = {p, shoff + (uint64_t)shnum * 64};
  shdr *secs = calloc(shnum, sizeof *secs);
  if (!secs) return HIPELF_NO_MEMORY;
  int rc = HIPELF_OK;
  for (unsigned i = 0; i < shnum && !rc; i++) {
    secs[i] = sec(&m, shoff, i);
    if (secs[i].type != SHT_NOBITS && secs[i].type != 0 && !in(&m, secs[i].off, secs[i].size))
      rc = fail(why, "a section lies past the image's end");
  }
  /* The symbol table: .symtab, else .dynsym (the loader's). */
  const shdr *sym = NULL;
  for (unsigned i = 0; i < shnum && !rc && !sym; i++)
    if (secs[i].type == SHT_SYMTAB) sym = &secs[i];
  for (unsigned i = 0; i < shnum && !rc && !sym; i++)
    if (secs[i].type == SHT_DYNSYM) sym = &secs[i];
  if (!rc && !sym) rc = fail(why, "no symbol table");
  if (!rc && (sym->entsize != 24 || sym->link >= shnum || secs[sym->link].type == SHT_NOBITS))
    rc = fail(why, "bad symbol table");
  uint64_t nsym = rc ? 0 : sym->size / 24;
  const shdr *strs = rc ? NULL : &secs[sym->link];
  uint64_t nobj = 0; /* room for every OBJECT symbol: kernels and globals are among them */
  for (uint64_t i = 1; i < nsym && !rc; i++) nobj += (p[sym->off + i * 24 + 4] & 0xf) == STT_OBJECT;
  if (!rc) {
    out->kernels = calloc(nobj + 1, sizeof *out->kernels);
    out->globals = calloc(nobj + 1, sizeof *out->globals);
    if (!out->kernels || !out->globals) rc = HIPELF_NO_MEMORY;
  }
  for (uint64_t i = 1; i < nsym && !rc; i++) {
    const unsigned char *e = p + sym->off + i * 24;
    const char *name = str_at(&m, strs, r32(e));
    unsigned type = e[4] & 0xf, shndx = r16(e + 6);
    uint64_t value = r64(e + 8), size = r64(e + 16);
    if (!name) {
      rc = fail(why, "a symbol's name lies outside its string table");
      break;
    }
    size_t len = strlen(name);
    if (type != STT_OBJECT || !len || len >= HIPELF_NAME_MAX) continue;
    const shdr *home = shndx && shndx < shnum ? &secs[shndx] : NULL;
    if (len > 3 && !strcmp(name + len - 3, ".kd")) {
      /* A kernel descriptor, of a FUNC symbol of the same name. */
      int func = 0;
      for (uint64_t j = 1; j < nsym && !func; j++) {
        const unsigned char *f = p + sym->off + j * 24;
        const char *fn = str_at(&m, strs, r32(f));
        func = fn && (f[4] & 0xf) == STT_FUNC && strlen(fn) == len - 3 && !strncmp(fn, name, len - 3);
      }
      if (!func) continue;
      const unsigned char *kd = home && size >= 64 ? vbytes(&m, home, value, 64) : NULL;
      if (!kd) {
        rc = fail(why, "a kernel descriptor lies outside the image");
        break;
      }
      hipelf_kernel *k = &out->kernels[out->nkernels++];
      memcpy(k->name, name, len - 3);
      k->group_seg = r32(kd), k->private_seg = r32(kd + 4), k->kernarg_size = r32(kd + 8);
      k->nargs = -1;
    } else if (size) {
      if (!home || value < home->addr || value - home->addr > home->size || size > home->size - (value - home->addr)) {
        rc = fail(why, "a variable lies outside its section");
        break;
      }
      hipelf_global *g = &out->globals[out->nglobals++];
      memcpy(g->name, name, len);
      g->size = size;
      g->init = vbytes(&m, home, value, size); /* NULL for .bss: zeros */
    }
  }
  for (unsigned i = 0; i < shnum && !rc; i++)
    if (secs[i].type == SHT_NOTE && !read_notes(&m, &secs[i], out)) rc = fail(why, "bad AMDGPU metadata note");
  free(secs);
  if (rc) hipelf_free(out);
  return rc;
}

void hipelf_free(hipelf_module *m) {
  free(m->kernels);
  free(m->globals);
  memset(m, 0, sizeof *m);
}
