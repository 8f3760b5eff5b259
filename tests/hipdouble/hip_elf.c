/*
 * Reads AMDGPU code objects for the HIP test double (hip_elf.h): kernels
 * are the OBJECT symbols `X.kd` (64-byte kernel descriptors) whose X is a
 * FUNC symbol; module globals (__constant__, __device__ variables) are the
 * other OBJECT symbols with a size.  From the ELF-64 specification and the
 * LLVM AMDGPU usage notes (kernel descriptor layout); written for the
 * double, nothing copied.
 */
#include "hip_elf.h"

#include <stdlib.h>
#include <string.h>

#define EM_AMDGPU 0xE0
#define SHT_SYMTAB 2
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
  free(secs);
  if (rc) hipelf_free(out);
  return rc;
}

void hipelf_free(hipelf_module *m) {
  free(m->kernels);
  free(m->globals);
  memset(m, 0, sizeof *m);
}
