/* The compiled-module cache on disk (src/kernel/cache.c) and the SHA-256 that
 * names and checks its entries (src/kernel/sha256.c).  Backend-independent:
 * no context is created. */
#define _GNU_SOURCE /* fork, mkdtemp, nftw, setenv, setgroups, setrlimit */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#include "core/core.h"
#include "kernel/cache.h"
#include "kernel/sha256.h"

static void expect_digest(const uint8_t d[DV__SHA256_SIZE], const char *want, const char *what) {
  char hex[DV__SHA256_HEX];
  dv__sha256_hex(d, hex);
  if (strcmp(hex, want) != 0) fail_msg("SHA-256 of %s = %s, expected %s", what, hex, want);
}

static void expect_sha(const void *msg, size_t n, const char *want, const char *what) {
  uint8_t d[DV__SHA256_SIZE];
  dv__sha256(msg, n, d);
  expect_digest(d, want, what);
}

/* The FIPS 180-4 examples (NIST CSRC "Examples with intermediate values")
 * and the NIST short/long-message vectors. */
static void test_sha256_vectors(void **state) {
  (void)state;
  expect_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "\"abc\"");
  expect_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "\"\"");
  expect_sha(NULL, 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "NULL, 0");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  expect_sha(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
             "the 448-bit message");
  const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
                     "lmnopqrsmnopqrstnopqrstu";
  expect_sha(m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
             "the 896-bit message");

  /* One million 'a', fed incrementally in uneven pieces (1..997 bytes) so
   * that the block buffer is entered at every offset. */
  char chunk[1000];
  memset(chunk, 'a', sizeof chunk);
  dv__sha256_ctx s;
  dv__sha256_init(&s);
  size_t left = 1000000, piece = 1;
  while (left) {
    size_t n = piece < left ? piece : left;
    dv__sha256_update(&s, chunk, n);
    left -= n;
    piece = piece % 997 + 1;
  }
  uint8_t d[DV__SHA256_SIZE];
  dv__sha256_final(&s, d);
  expect_digest(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "one million 'a'");

  /* Padding boundaries: the length fits in the last block (55), needs one
   * more (56, 63, 64), and the same one block later (119, 120).  Expected
   * values from Python's hashlib. */
  static const struct { size_t n; const char *hex; } pad[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
  };
  for (size_t i = 0; i < sizeof pad / sizeof pad[0]; i++) {
    char what[32];
    snprintf(what, sizeof what, "%zu 'a'", pad[i].n);
    expect_sha(chunk, pad[i].n, pad[i].hex, what);
  }
}

/* Incremental hashing equals one-shot hashing at every split point, and
 * the context can be reused after init. */
static void test_sha256_incremental(void **state) {
  (void)state;
  uint8_t msg[300];
  for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 131u + 7u);
  for (size_t n = 0; n <= sizeof msg; n += 7) {
    uint8_t whole[DV__SHA256_SIZE];
    dv__sha256(msg, n, whole);
    for (size_t cut = 0; cut <= n; cut++) {
      dv__sha256_ctx s;
      uint8_t d[DV__SHA256_SIZE];
      dv__sha256_init(&s);
      dv__sha256_update(&s, msg, cut);
      dv__sha256_update(&s, NULL, 0);
      dv__sha256_update(&s, msg + cut, n - cut);
      dv__sha256_final(&s, d);
      if (memcmp(d, whole, sizeof d) != 0) fail_msg("length %zu split at %zu differs", n, cut);
    }
  }
}

/* Fields are length-prefixed (8 bytes, little-endian): "ab","c" and
 * "a","bc" differ; the expected value is hashlib over the same bytes. */
static void test_sha256_fields(void **state) {
  (void)state;
  dv__sha256_ctx s;
  uint8_t d1[DV__SHA256_SIZE], d2[DV__SHA256_SIZE];
  dv__sha256_init(&s);
  dv__sha256_field(&s, "ab", 2);
  dv__sha256_field(&s, "c", 1);
  dv__sha256_final(&s, d1);
  expect_digest(d1, "43ee655579de01ca739b3f95c1c2d3f46d353b2c0df818064ea594506cdb2617", "fields ab,c");
  dv__sha256_init(&s);
  dv__sha256_field(&s, "a", 1);
  dv__sha256_field(&s, "bc", 2);
  dv__sha256_final(&s, d2);
  assert_memory_not_equal(d1, d2, sizeof d1);
}

/* ---- the cache: fixtures and helpers ---- */

static char g_root[512]; /* a fresh temporary directory for the whole group */

/* Debug-level log lines that report an invalid entry ("...; a miss..."). */
static int g_invalid_logs;
static char g_last_invalid[1024];
static void log_cb(dv_log_level level, const char *msg, void *user) {
  (void)user;
  if (level == DV_LOG_DEBUG && strstr(msg, "kernel cache:") && strstr(msg, "; a miss")) {
    g_invalid_logs++;
    snprintf(g_last_invalid, sizeof g_last_invalid, "%s", msg);
  }
}

static int chmod_dirs(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)ftw;
  if (flag == FTW_D && st->st_uid == geteuid()) chmod(path, 0700);
  return 0;
}
static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}
static void remove_tree(const char *path) {
  nftw(path, chmod_dirs, 16, FTW_PHYS);
  nftw(path, remove_one, 16, FTW_PHYS | FTW_DEPTH);
}

static int group_setup(void **state) {
  (void)state;
  const char *tmp = getenv("TMPDIR");
  snprintf(g_root, sizeof g_root, "%s/dv-kcache-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(g_root)) return -1;
  dv_set_log_callback(log_cb, NULL);
  dv__log_set_level(DV_LOG_DEBUG);
  umask(022);
  return 0;
}
static int group_teardown(void **state) {
  (void)state;
  remove_tree(g_root);
  dv_set_log_callback(NULL, NULL);
  return 0;
}

/* <root>/<name>: each test works in its own directory. */
static void tpath(char *buf, size_t cap, const char *name) {
  int n = snprintf(buf, cap, "%s/%s", g_root, name);
  assert_true(n > 0 && (size_t)n < cap);
}

static void make_key(uint8_t key[DV__KCACHE_KEY_SIZE], const char *label) {
  dv__sha256(label, strlen(label), key);
}

static void entry_path(char *buf, size_t cap, const char *dir, const uint8_t key[DV__KCACHE_KEY_SIZE]) {
  char hex[DV__SHA256_HEX];
  dv__sha256_hex(key, hex);
  int n = snprintf(buf, cap, "%s/%s.dvk", dir, hex);
  assert_true(n > 0 && (size_t)n < cap);
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* The whole file, malloc'ed. */
static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long len = ftell(f);
  assert_true(len >= 0);
  rewind(f);
  unsigned char *buf = malloc((size_t)len + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return buf;
}

/* Files in dir whose names contain `part`. */
static int count_names(const char *dir, const char *part) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strstr(e->d_name, part)) n++;
  closedir(d);
  return n;
}

/* get must hit with exactly (want, n). */
static void expect_hit(dv__kcache *c, const uint8_t *key, const void *want, size_t n) {
  void *img = (void *)1;
  size_t size = 12345;
  assert_ok(dv__kcache_get(c, key, &img, &size));
  if (!img) fail_msg("expected a hit of %zu bytes, got a miss", n);
  assert_int_equal(size, n);
  if (n) assert_memory_equal(img, want, n);
  dv__free(img);
}

static void expect_miss(dv__kcache *c, const uint8_t *key) {
  void *img = (void *)1;
  size_t size = 12345;
  assert_ok(dv__kcache_get(c, key, &img, &size));
  if (img) fail_msg("expected a miss, got a hit of %zu bytes", size);
  assert_int_equal(size, 0);
}

static void expect_error(const char *dir, const char *phrase) {
  dv__kcache *c = (dv__kcache *)1;
  assert_status(dv__kcache_open(dir, &c), DV_ERR_INVALID_ARGUMENT);
  assert_null(c);
  if (!strstr(dv_last_error(), phrase))
    fail_msg("open(%s): message \"%s\" lacks \"%s\"", dir, dv_last_error(), phrase);
  if (!strstr(dv_last_error(), dir)) fail_msg("message \"%s\" does not name %s", dv_last_error(), dir);
}

/* ---- the cache: tests ---- */

/* put then get returns the same bytes for sizes around the header size and
 * beyond a MiB; the directory and its missing parents are created 0700, the
 * entry is <hex>.dvk, mode 0600, header+payload in the documented layout;
 * a second put replaces the entry; nothing temporary is left. */
static void test_roundtrip(void **state) {
  (void)state;
  char dir[600], top[600], file[800];
  tpath(top, sizeof top, "rt");
  tpath(dir, sizeof dir, "rt/a/b/");
  dv__kcache *c;
  assert_ok(dv__kcache_open(dir, &c));
  tpath(dir, sizeof dir, "rt/a/b"); /* trailing slashes are dropped */
  assert_string_equal(dv__kcache_path(c), dir);
  struct stat st;
  const char *levels[] = {"rt", "rt/a", "rt/a/b"};
  for (int i = 0; i < 3; i++) {
    char p[600];
    tpath(p, sizeof p, levels[i]);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
  }

  static const size_t sizes[] = {0, 1, 87, 88, 89, 4096, (1u << 20) + 3};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    unsigned char *payload = malloc(n + 1);
    assert_non_null(payload);
    fill_pattern(payload, n, (unsigned)i + 1);
    char label[32];
    snprintf(label, sizeof label, "size %zu", n);
    uint8_t key[DV__KCACHE_KEY_SIZE];
    make_key(key, label);
    assert_ok(dv__kcache_put(c, key, n ? payload : NULL, n));
    expect_hit(c, key, payload, n);

    entry_path(file, sizeof file, dir, key);
    assert_int_equal(stat(file, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    size_t len;
    unsigned char *raw = read_file(file, &len);
    assert_int_equal(len, DV__KCACHE_HEADER + n);
    assert_memory_equal(raw, "DVKCACHE", 8);
    assert_int_equal(raw[8] | raw[9] << 8 | raw[10] << 16 | (uint32_t)raw[11] << 24, DV__KCACHE_FORMAT);
    assert_int_equal(raw[12] | raw[13] << 8, DV__KCACHE_HEADER);
    uint64_t stored = 0;
    for (int b = 7; b >= 0; b--) stored = stored << 8 | raw[16 + b];
    assert_int_equal(stored, n);
    uint8_t sum[DV__SHA256_SIZE];
    dv__sha256(payload, n, sum);
    assert_memory_equal(raw + 24, sum, 32);
    assert_memory_equal(raw + 56, key, 32);
    if (n) assert_memory_equal(raw + DV__KCACHE_HEADER, payload, n);
    free(raw);
    free(payload);
  }

  /* Replacing an entry. */
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "size 4096");
  unsigned char other[3000];
  fill_pattern(other, sizeof other, 99);
  assert_ok(dv__kcache_put(c, key, other, sizeof other));
  expect_hit(c, key, other, sizeof other);

  assert_int_equal(count_names(dir, ".dvk"), 7);
  assert_int_equal(count_names(dir, ".tmp-"), 0);
  dv__kcache_close(c);

  /* The entries outlive the handle. */
  assert_ok(dv__kcache_open(dir, &c));
  expect_hit(c, key, other, sizeof other);
  dv__kcache_close(c);
  remove_tree(top);
}

/* An absent key: DV_OK, NULL, 0, and nothing logged as invalid. */
static void test_miss(void **state) {
  (void)state;
  char dir[600];
  tpath(dir, sizeof dir, "miss");
  dv__kcache *c;
  assert_ok(dv__kcache_open(dir, &c));
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "never stored");
  int logs = g_invalid_logs;
  expect_miss(c, key);
  assert_int_equal(g_invalid_logs, logs);
  dv__kcache_close(c);
}

/* Each kind of damage: a miss, logged at debug level, the file removed;
 * then a put stores the entry again and get hits. */
static void test_corrupt(void **state) {
  (void)state;
  char dir[600], file[800];
  tpath(dir, sizeof dir, "corrupt");
  dv__kcache *c;
  assert_ok(dv__kcache_open(dir, &c));
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "corrupt");
  entry_path(file, sizeof file, dir, key);
  unsigned char payload[5000];
  fill_pattern(payload, sizeof payload, 7);

  enum { FLIP_PAYLOAD, FLIP_LAST, FLIP_SUM, TRUNCATE_1, TRUNCATE_HEADER, EMPTY, BAD_MAGIC,
         BAD_VERSION, BAD_HEADER_SIZE, LENGTH_PLUS_1, LENGTH_HUGE, TRAILING_BYTE, KINDS };
  static const char *const names[KINDS] = {
      "payload byte flipped", "last byte flipped", "checksum byte flipped", "truncated by 1",
      "truncated inside the header", "empty file", "bad magic", "format version 2",
      "header size 89", "length + 1", "length 2^63", "a byte appended"};
  static const char *const reasons[KINDS] = {
      "checksum", "checksum", "checksum", "length", "shorter than a header", "shorter than a header",
      "bad magic", "format version", "header size", "length", "length", "length"};
  for (int k = 0; k < KINDS; k++) {
    assert_ok(dv__kcache_put(c, key, payload, sizeof payload));
    size_t len;
    unsigned char *raw = read_file(file, &len);
    assert_int_equal(len, DV__KCACHE_HEADER + sizeof payload);
    switch (k) {
    case FLIP_PAYLOAD: raw[DV__KCACHE_HEADER + 1234] ^= 0x01; break;
    case FLIP_LAST: raw[len - 1] ^= 0x80; break;
    case FLIP_SUM: raw[24 + 31] ^= 0x10; break;
    case TRUNCATE_1: len -= 1; break;
    case TRUNCATE_HEADER: len = 40; break;
    case EMPTY: len = 0; break;
    case BAD_MAGIC: raw[0] = 'X'; break;
    case BAD_VERSION: raw[8] = 2; break;
    case BAD_HEADER_SIZE: raw[12] = 89; break;
    case LENGTH_PLUS_1: raw[16] += 1; break;
    case LENGTH_HUGE: raw[23] = 0x80; break;
    case TRAILING_BYTE: raw[len++] = 0; break; /* read_file left a spare byte */
    }
    write_file(file, raw, len);
    free(raw);
    int logs = g_invalid_logs;
    expect_miss(c, key);
    if (exists(file)) fail_msg("%s: the entry was not removed", names[k]);
    if (g_invalid_logs != logs + 1) fail_msg("%s: not logged at debug level", names[k]);
    if (!strstr(g_last_invalid, reasons[k]))
      fail_msg("%s: log \"%s\" lacks \"%s\"", names[k], g_last_invalid, reasons[k]);
    assert_ok(dv__kcache_put(c, key, payload, sizeof payload));
    expect_hit(c, key, payload, sizeof payload);
  }
  dv__kcache_close(c);
}

/* A file under another key's name is a miss and is removed; the key it
 * holds is not found under its own name either.  A symbolic link at an
 * entry's name is a miss; put replaces the link, not its target. */
static void test_foreign(void **state) {
  (void)state;
  char dir[600], fa[800], fb[800], fc[800];
  tpath(dir, sizeof dir, "foreign");
  dv__kcache *c;
  assert_ok(dv__kcache_open(dir, &c));
  uint8_t ka[DV__KCACHE_KEY_SIZE], kb[DV__KCACHE_KEY_SIZE], kc[DV__KCACHE_KEY_SIZE];
  make_key(ka, "A");
  make_key(kb, "B");
  make_key(kc, "C");
  entry_path(fa, sizeof fa, dir, ka);
  entry_path(fb, sizeof fb, dir, kb);
  entry_path(fc, sizeof fc, dir, kc);
  assert_ok(dv__kcache_put(c, ka, "payload A", 9));
  assert_ok(dv__kcache_put(c, kb, "payload B", 9));

  /* A's entry renamed to C's (absent) name. */
  assert_int_equal(rename(fa, fc), 0);
  int logs = g_invalid_logs;
  expect_miss(c, kc);
  assert_false(exists(fc));
  assert_int_equal(g_invalid_logs, logs + 1);
  assert_non_null(strstr(g_last_invalid, "foreign"));
  expect_miss(c, ka);
  expect_hit(c, kb, "payload B", 9);

  /* A's entry renamed over B's. */
  assert_ok(dv__kcache_put(c, ka, "payload A", 9));
  assert_int_equal(rename(fa, fb), 0);
  expect_miss(c, kb);
  assert_false(exists(fb));
  assert_ok(dv__kcache_put(c, kb, "payload B", 9));
  expect_hit(c, kb, "payload B", 9);

  /* A symbolic link to a valid entry elsewhere. */
  char target[800];
  snprintf(target, sizeof target, "%s/target", dir);
  assert_ok(dv__kcache_put(c, kc, "payload C", 9));
  assert_int_equal(rename(fc, target), 0);
  assert_int_equal(symlink(target, fc), 0);
  expect_miss(c, kc);
  assert_ok(dv__kcache_put(c, kc, "new C", 5));
  struct stat st;
  assert_int_equal(lstat(fc, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  expect_hit(c, kc, "new C", 5);
  assert_int_equal(stat(target, &st), 0);
  assert_int_equal(st.st_size, DV__KCACHE_HEADER + 9);
  dv__kcache_close(c);
}

/* The unwritable cases, as a user without root's override.  Returns 0 when
 * both are refused with the right message. */
static int check_unwritable(const char *ro) {
  char sub[700];
  snprintf(sub, sizeof sub, "%s/sub", ro);
  dv__kcache *c = NULL;
  dv_status rc = dv__kcache_open(ro, &c);
  if (rc != DV_ERR_INVALID_ARGUMENT || c || !strstr(dv_last_error(), "not writable")) {
    fprintf(stderr, "open(%s) as uid %u: %s: %s\n", ro, (unsigned)geteuid(), dv_status_name(rc), dv_last_error());
    return 1;
  }
  rc = dv__kcache_open(sub, &c);
  if (rc != DV_ERR_INVALID_ARGUMENT || c || !strstr(dv_last_error(), "cannot be created")) {
    fprintf(stderr, "open(%s) as uid %u: %s: %s\n", sub, (unsigned)geteuid(), dv_status_name(rc), dv_last_error());
    return 1;
  }
  return 0;
}

/* Run f(arg) in a child process; returns its exit status (0: passed). */
static int in_child(int (*f)(const void *), const void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(f(arg));
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st)) fail_msg("child ended by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
  return WEXITSTATUS(st);
}

#define NOBODY 65534
static int unwritable_as_nobody(const void *arg) {
  if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0) {
    perror("dropping privileges");
    return 2;
  }
  return check_unwritable(arg);
}

/* A regular file, a path through a file, a directory writable by others or
 * by the group, one owned by another user, one the user cannot write, and
 * one that cannot be created: DV_ERR_INVALID_ARGUMENT, *out NULL, and a
 * message naming the directory and the reason. */
static void test_bad_dirs(void **state) {
  (void)state;
  char base[600], p[700];
  tpath(base, sizeof base, "bad");
  assert_int_equal(mkdir(base, 0700), 0);

  snprintf(p, sizeof p, "%s/file", base);
  write_file(p, "x", 1);
  expect_error(p, "not a directory");
  snprintf(p, sizeof p, "%s/file/sub", base);
  expect_error(p, "not a directory");

  snprintf(p, sizeof p, "%s/world", base);
  assert_int_equal(mkdir(p, 0700), 0);
  assert_int_equal(chmod(p, 0777), 0);
  expect_error(p, "writable by others");
  assert_int_equal(chmod(p, 01777), 0); /* sticky changes nothing */
  expect_error(p, "writable by others");
  snprintf(p, sizeof p, "%s/group", base);
  assert_int_equal(mkdir(p, 0700), 0);
  assert_int_equal(chmod(p, 0770), 0);
  expect_error(p, "writable by its group");

  if (geteuid() == 0) {
    snprintf(p, sizeof p, "%s/theirs", base);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chown(p, NOBODY, NOBODY), 0);
    expect_error(p, "owned by uid 65534");

    /* Root writes anywhere: check as nobody, in a child, on a directory
     * nobody owns but cannot write (reached through traversable parents). */
    snprintf(p, sizeof p, "%s/ro", base);
    assert_int_equal(mkdir(p, 0500), 0);
    assert_int_equal(chown(p, NOBODY, NOBODY), 0);
    assert_int_equal(chmod(g_root, 0711), 0);
    assert_int_equal(chmod(base, 0711), 0);
    int rc = in_child(unwritable_as_nobody, p);
    assert_int_equal(chmod(base, 0700), 0);
    assert_int_equal(chmod(g_root, 0700), 0);
    assert_int_equal(rc, 0);
  } else {
    expect_error("/", "owned by uid 0");
    snprintf(p, sizeof p, "%s/ro", base);
    assert_int_equal(mkdir(p, 0500), 0);
    assert_int_equal(check_unwritable(p), 0);
  }
}

/* With a file size limit of 1000 bytes, a put that exceeds it fails with a
 * status (not a signal), leaves no temporary file and no entry; an earlier
 * entry stays readable. */
static int put_over_limit(const void *arg) {
  const char *dir = arg;
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {1000, 1000};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 2;
  dv__kcache *c;
  if (dv__kcache_open(dir, &c)) return 3;
  uint8_t small[DV__KCACHE_KEY_SIZE], big[DV__KCACHE_KEY_SIZE];
  make_key(small, "small");
  make_key(big, "big");
  static unsigned char payload[10000];
  int fails = 0;
  if (dv__kcache_put(c, small, payload, 100) != DV_OK) fails |= 4;
  dv_status rc = dv__kcache_put(c, big, payload, sizeof payload);
  if (rc != DV__KCACHE_IO_ERROR || !strstr(dv_last_error(), strerror(EFBIG))) {
    fprintf(stderr, "put over the limit: %s: %s\n", dv_status_name(rc), dv_last_error());
    fails |= 8;
  }
  void *img;
  size_t n;
  if (dv__kcache_get(c, big, &img, &n) != DV_OK || img) fails |= 16;
  if (dv__kcache_get(c, small, &img, &n) != DV_OK || !img || n != 100) fails |= 32;
  dv__free(img);
  dv__kcache_close(c);
  return fails;
}

static void test_put_failure(void **state) {
  (void)state;
  char dir[600];
  tpath(dir, sizeof dir, "putfail");
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(in_child(put_over_limit, dir), 0);
  assert_int_equal(count_names(dir, ".tmp-"), 0);
  assert_int_equal(count_names(dir, ".dvk"), 1);
}

/* Environment and working directory restored by the teardown even when a
 * test fails.  The test runs inside its own directory, so that a relative
 * path wrongly taken for a cache directory lands in the temporary tree. */
static char *g_saved_xdg, *g_saved_home;
static int g_saved_cwd = -1;
static int env_setup(void **state) {
  (void)state;
  const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  g_saved_xdg = x ? strdup(x) : NULL;
  g_saved_home = h ? strdup(h) : NULL;
  char dir[600];
  snprintf(dir, sizeof dir, "%s/env", g_root);
  g_saved_cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g_saved_cwd < 0 || mkdir(dir, 0700) != 0 || chdir(dir) != 0) return -1;
  return 0;
}
static int env_teardown(void **state) {
  (void)state;
  if (g_saved_cwd >= 0 && fchdir(g_saved_cwd) != 0) return -1;
  if (g_saved_cwd >= 0) close(g_saved_cwd);
  g_saved_cwd = -1;
  if (g_saved_xdg) setenv("XDG_CACHE_HOME", g_saved_xdg, 1); else unsetenv("XDG_CACHE_HOME");
  if (g_saved_home) setenv("HOME", g_saved_home, 1); else unsetenv("HOME");
  free(g_saved_xdg);
  free(g_saved_home);
  return 0;
}

static void expect_default(const char *option, const char *want) {
  dv__kcache *c;
  assert_ok(dv__kcache_open(option, &c));
  assert_string_equal(dv__kcache_path(c), want);
  dv__kcache_close(c);
  struct stat st;
  assert_int_equal(stat(want, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 07777, 0700);
}

/* "" and NULL: $XDG_CACHE_HOME/devarray/kernels when XDG_CACHE_HOME is
 * absolute, else $HOME/.cache/devarray/kernels; an explicit directory wins
 * over both.  The directories created on the way are 0700.  usage reports
 * the same path without creating it. */
static void test_default_dir(void **state) {
  (void)state;
  char xdg[600], home[600], want[700], p[700];
  tpath(xdg, sizeof xdg, "env/xdg");
  tpath(home, sizeof home, "env/home");
  setenv("XDG_CACHE_HOME", xdg, 1);
  setenv("HOME", home, 1);
  snprintf(want, sizeof want, "%s/devarray/kernels", xdg);
  expect_default("", want);
  expect_default(NULL, want);
  struct stat st;
  assert_int_equal(stat(xdg, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0700);

  snprintf(want, sizeof want, "%s/.cache/devarray/kernels", home);
  setenv("XDG_CACHE_HOME", "relative/cache", 1); /* invalid by the XDG specification */
  expect_default("", want);
  assert_false(exists("relative")); /* relative to the test's own directory */
  setenv("XDG_CACHE_HOME", "", 1);
  expect_default("", want);
  unsetenv("XDG_CACHE_HOME");
  expect_default("", want);
  snprintf(p, sizeof p, "%s/.cache", home);
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0700);

  tpath(p, sizeof p, "env/explicit");
  expect_default(p, p);

  /* usage: where it would be, created or not. */
  tpath(home, sizeof home, "env/home2");
  setenv("HOME", home, 1);
  snprintf(want, sizeof want, "%s/.cache/devarray/kernels", home);
  char path[700];
  uint64_t entries = 9, bytes = 9;
  assert_ok(dv__kcache_usage("", &entries, &bytes, path, sizeof path));
  assert_string_equal(path, want);
  assert_int_equal(entries, 0);
  assert_int_equal(bytes, 0);
  assert_false(exists(home));
}

/* usage counts entries (name <64 hex>.dvk, regular files) and their bytes,
 * headers included, and nothing else; it fills the path, refuses a buffer
 * too small, creates nothing, and refuses a regular file. */
static void test_usage(void **state) {
  (void)state;
  char dir[600], path[700], p[800];
  tpath(dir, sizeof dir, "usage");
  uint64_t entries = 9, bytes = 9;
  assert_ok(dv__kcache_usage(dir, &entries, &bytes, path, sizeof path));
  assert_string_equal(path, dir);
  assert_int_equal(entries, 0);
  assert_int_equal(bytes, 0);
  assert_false(exists(dir));

  dv__kcache *c;
  assert_ok(dv__kcache_open(dir, &c));
  unsigned char payload[30] = {0};
  for (int i = 1; i <= 3; i++) {
    uint8_t key[DV__KCACHE_KEY_SIZE];
    char label[16];
    snprintf(label, sizeof label, "usage %d", i);
    make_key(key, label);
    assert_ok(dv__kcache_put(c, key, payload, (size_t)(10 * i)));
  }
  dv__kcache_close(c);
  /* Not entries: other names, a directory, a temporary file, upper-case hex. */
  snprintf(p, sizeof p, "%s/notes.txt", dir);
  write_file(p, "hello", 5);
  snprintf(p, sizeof p, "%s/%064d.dvk", dir, 0);
  assert_int_equal(mkdir(p, 0700), 0);
  snprintf(p, sizeof p, "%s/%064d.dvk.tmp-abcdefABCDEF", dir, 1);
  write_file(p, "temp", 4);
  snprintf(p, sizeof p, "%s/%s.dvk", dir, "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789");
  write_file(p, "upper", 5);

  assert_ok(dv__kcache_usage(dir, &entries, &bytes, path, sizeof path));
  assert_int_equal(entries, 3);
  assert_int_equal(bytes, 3 * DV__KCACHE_HEADER + 60);
  assert_ok(dv__kcache_usage(dir, NULL, &bytes, NULL, 0));
  assert_int_equal(bytes, 3 * DV__KCACHE_HEADER + 60);

  char small[8];
  assert_status(dv__kcache_usage(dir, &entries, &bytes, small, sizeof small), DV_ERR_INVALID_ARGUMENT);
  assert_int_equal(small[0], 0);
  assert_int_equal(entries, 0);

  snprintf(p, sizeof p, "%s/notes.txt", dir);
  assert_status(dv__kcache_usage(p, &entries, &bytes, path, sizeof path), DV_ERR_INVALID_ARGUMENT);
}

/* clear removes entries and leftover temporary files, and nothing else;
 * the directory stays.  A directory that does not exist is clear already
 * (and is not created); a regular file is refused. */
static void test_clear(void **state) {
  (void)state;
  char dir[600], p[800];
  tpath(dir, sizeof dir, "clear");
  assert_ok(dv__kcache_clear(dir));
  assert_false(exists(dir));

  dv__kcache *c;
  assert_ok(dv__kcache_open(dir, &c));
  uint8_t keys[5][DV__KCACHE_KEY_SIZE];
  for (int i = 0; i < 5; i++) {
    char label[16];
    snprintf(label, sizeof label, "clear %d", i);
    make_key(keys[i], label);
    assert_ok(dv__kcache_put(c, keys[i], label, strlen(label)));
  }
  snprintf(p, sizeof p, "%s/%064d.dvk.tmp-abcdefABCDEF", dir, 1);
  write_file(p, "temp", 4);
  snprintf(p, sizeof p, "%s/notes.txt", dir);
  write_file(p, "hello", 5);
  snprintf(p, sizeof p, "%s/keep.dvk", dir);
  write_file(p, "not ours", 8);
  snprintf(p, sizeof p, "%s/sub", dir);
  assert_int_equal(mkdir(p, 0700), 0);

  assert_ok(dv__kcache_clear(dir));
  uint64_t entries, bytes;
  assert_ok(dv__kcache_usage(dir, &entries, &bytes, NULL, 0));
  assert_int_equal(entries, 0);
  assert_int_equal(bytes, 0);
  assert_int_equal(count_names(dir, ".tmp-"), 0);
  snprintf(p, sizeof p, "%s/notes.txt", dir);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/keep.dvk", dir);
  assert_true(exists(p));
  snprintf(p, sizeof p, "%s/sub", dir);
  assert_true(exists(p));
  for (int i = 0; i < 5; i++) expect_miss(c, keys[i]);
  /* The open handle still works. */
  assert_ok(dv__kcache_put(c, keys[0], "again", 5));
  expect_hit(c, keys[0], "again", 5);
  dv__kcache_close(c);

  snprintf(p, sizeof p, "%s/notes.txt", dir);
  assert_status(dv__kcache_clear(p), DV_ERR_INVALID_ARGUMENT);
}

/* ---- concurrency: two writers of one key and a reader, in processes ---- */

#define WRITES 200
#define SIZE_A ((size_t)200 * 1024)
#define SIZE_B ((size_t)300 * 1024 + 17)

struct race {
  const char *dir;
  int go;      /* read end: closed by the parent to start everyone */
  int done;    /* read end: EOF once both writers have finished */
  unsigned char *a, *b;
};

static void wait_eof(int fd) {
  char ch;
  while (read(fd, &ch, 1) < 0 && errno == EINTR) {
  }
}

static int race_writer(const void *arg) {
  const struct race *r = arg;
  bool is_a = r->a != NULL;
  dv__kcache *c;
  if (dv__kcache_open(r->dir, &c)) return 2;
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "race");
  wait_eof(r->go);
  int fails = 0;
  for (int i = 0; i < WRITES; i++)
    if (dv__kcache_put(c, key, is_a ? r->a : r->b, is_a ? SIZE_A : SIZE_B) != DV_OK) fails++;
  dv__kcache_close(c);
  if (fails) fprintf(stderr, "writer %c: %d puts failed: %s\n", is_a ? 'A' : 'B', fails, dv_last_error());
  return fails ? 3 : 0;
}

static int race_reader(const void *arg) {
  const struct race *r = arg;
  dv__kcache *c;
  if (dv__kcache_open(r->dir, &c)) return 2;
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "race");
  g_invalid_logs = 0;
  fcntl(r->done, F_SETFL, O_NONBLOCK);
  wait_eof(r->go);
  long hits_a = 0, hits_b = 0, misses = 0, late_misses = 0, torn = 0;
  for (bool last = false;;) {
    char ch;
    ssize_t n = read(r->done, &ch, 1);
    bool finished = n == 0; /* EOF: both writers are done */
    void *img;
    size_t size;
    bool hit = false;
    if (dv__kcache_get(c, key, &img, &size) != DV_OK) {
      fprintf(stderr, "reader: get: %s\n", dv_last_error());
      torn++;
    } else if (!img) {
      /* Once the entry exists, renames replace it atomically: no gap. */
      if (hits_a + hits_b) late_misses++;
      misses++;
    } else if (size == SIZE_A && memcmp(img, r->a, SIZE_A) == 0) {
      hits_a++, hit = true;
    } else if (size == SIZE_B && memcmp(img, r->b, SIZE_B) == 0) {
      hits_b++, hit = true;
    } else {
      torn++;
    }
    dv__free(img);
    if (last) {
      if (!hit) torn++; /* after both writers, the entry must be there */
      break;
    }
    last = finished;
  }
  dv__kcache_close(c);
  fprintf(stderr,
          "reader: %ld hits of A, %ld of B, %ld misses (%ld after a hit), %ld torn, %d invalid entries seen\n",
          hits_a, hits_b, misses, late_misses, torn, g_invalid_logs);
  return torn || late_misses || g_invalid_logs ? 1 : 0;
}

/* Two processes put the same key WRITES times each (payloads of different
 * sizes) while a third reads it in a loop: every read is a miss or exactly
 * one of the two payloads, never an invalid entry, and no miss follows the
 * first hit; afterwards one whole entry and no temporary file remain. */
static void test_concurrent_writers(void **state) {
  (void)state;
  char dir[600];
  tpath(dir, sizeof dir, "race");
  dv__kcache *c;
  assert_ok(dv__kcache_open(dir, &c));
  unsigned char *a = malloc(SIZE_A), *b = malloc(SIZE_B);
  assert_non_null(a);
  assert_non_null(b);
  fill_pattern(a, SIZE_A, 1);
  fill_pattern(b, SIZE_B, 2);
  int go[2], done[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(done), 0);
  struct race ra = {dir, go[0], done[0], a, NULL}, rb = {dir, go[0], done[0], NULL, b},
              rr = {dir, go[0], done[0], a, b};

  fflush(NULL);
  pid_t pids[3];
  const struct race *args[3] = {&ra, &rb, &rr};
  for (int i = 0; i < 3; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      close(go[1]);
      close(done[1]);
      _exit(i < 2 ? race_writer(args[i]) : race_reader(args[i]));
    }
  }
  close(go[0]);
  close(done[0]);
  close(go[1]); /* go */
  int status[3];
  for (int i = 0; i < 2; i++) assert_int_equal(waitpid(pids[i], &status[i], 0), pids[i]);
  close(done[1]); /* the writers are done */
  assert_int_equal(waitpid(pids[2], &status[2], 0), pids[2]);
  for (int i = 0; i < 3; i++) {
    if (!WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0)
      fail_msg("%s failed (status 0x%x)", i < 2 ? "a writer" : "the reader", status[i]);
  }

  assert_int_equal(count_names(dir, ".dvk"), 1);
  assert_int_equal(count_names(dir, ".tmp-"), 0);
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "race");
  void *img;
  size_t size;
  assert_ok(dv__kcache_get(c, key, &img, &size));
  assert_non_null(img);
  assert_true((size == SIZE_A && memcmp(img, a, SIZE_A) == 0) || (size == SIZE_B && memcmp(img, b, SIZE_B) == 0));
  dv__free(img);
  dv__kcache_close(c);
  free(a);
  free(b);
}

/* Every host allocation of open, get, usage and clear made to fail in turn:
 * DV_ERR_HOST_OUT_OF_MEMORY, outputs cleared, nothing leaked (ASan), and
 * the call succeeds once the fault passes. */
static void test_oom(void **state) {
  (void)state;
  char dir[600], path[700];
  tpath(dir, sizeof dir, "oom");
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "oom");
  dv__kcache *c = NULL;
  dv_status rc;
  int k;
  for (k = 1; k < 100; k++) {
    dv__fault_host_set((uint64_t)k);
    rc = dv__kcache_open(dir, &c);
    dv__fault_host_set(0);
    if (rc == DV_OK) break;
    assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
    assert_null(c);
  }
  assert_true(k > 1 && k < 100);
  assert_ok(dv__kcache_put(c, key, "image", 5));
  for (k = 1; k < 100; k++) {
    void *img = (void *)1;
    size_t n = 1;
    dv__fault_host_set((uint64_t)k);
    rc = dv__kcache_get(c, key, &img, &n);
    dv__fault_host_set(0);
    if (rc == DV_OK) {
      assert_non_null(img);
      dv__free(img);
      break;
    }
    assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
    assert_null(img);
    assert_int_equal(n, 0);
  }
  assert_true(k > 1 && k < 100);
  dv__kcache_close(c);
  for (k = 1; k < 100; k++) {
    uint64_t entries = 9;
    dv__fault_host_set((uint64_t)k);
    rc = dv__kcache_usage(dir, &entries, NULL, path, sizeof path);
    dv__fault_host_set(0);
    if (rc == DV_OK) break;
    assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
    assert_int_equal(entries, 0);
  }
  assert_true(k > 1 && k < 100);
  for (k = 1; k < 100; k++) {
    dv__fault_host_set((uint64_t)k);
    rc = dv__kcache_clear(dir);
    dv__fault_host_set(0);
    if (rc == DV_OK) break;
    assert_int_equal(rc, DV_ERR_HOST_OUT_OF_MEMORY);
  }
  assert_true(k > 1 && k < 100);
}

/* NULL where a pointer is required: DV_ERR_NULL_ARGUMENT; an empty payload
 * may be NULL; close(NULL) is a no-op. */
static void test_null_args(void **state) {
  (void)state;
  char dir[600];
  tpath(dir, sizeof dir, "null");
  dv__kcache *c;
  uint8_t key[DV__KCACHE_KEY_SIZE];
  make_key(key, "null");
  void *img;
  size_t n;
  assert_status(dv__kcache_open(dir, NULL), DV_ERR_NULL_ARGUMENT);
  assert_ok(dv__kcache_open(dir, &c));
  assert_status(dv__kcache_get(NULL, key, &img, &n), DV_ERR_NULL_ARGUMENT);
  assert_null(img);
  assert_status(dv__kcache_get(c, NULL, &img, &n), DV_ERR_NULL_ARGUMENT);
  assert_status(dv__kcache_get(c, key, NULL, &n), DV_ERR_NULL_ARGUMENT);
  assert_status(dv__kcache_get(c, key, &img, NULL), DV_ERR_NULL_ARGUMENT);
  assert_status(dv__kcache_put(NULL, key, "x", 1), DV_ERR_NULL_ARGUMENT);
  assert_status(dv__kcache_put(c, NULL, "x", 1), DV_ERR_NULL_ARGUMENT);
  assert_status(dv__kcache_put(c, key, NULL, 1), DV_ERR_NULL_ARGUMENT);
  expect_miss(c, key);
  assert_ok(dv__kcache_put(c, key, NULL, 0));
  expect_hit(c, key, "", 0);
  dv__kcache_close(c);
  dv__kcache_close(NULL);
  assert_null(dv__kcache_path(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vectors),
      cmocka_unit_test(test_sha256_incremental),
      cmocka_unit_test(test_sha256_fields),
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_miss),
      cmocka_unit_test(test_corrupt),
      cmocka_unit_test(test_foreign),
      cmocka_unit_test(test_bad_dirs),
      cmocka_unit_test(test_put_failure),
      cmocka_unit_test_setup_teardown(test_default_dir, env_setup, env_teardown),
      cmocka_unit_test(test_usage),
      cmocka_unit_test(test_clear),
      cmocka_unit_test(test_concurrent_writers),
      cmocka_unit_test(test_oom),
      cmocka_unit_test(test_null_args),
  };
  return cmocka_run_group_tests_name("kcache", tests, group_setup, group_teardown);
}
