/*
 * devarray info [--json]: backends, devices, capacities, options.
 */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- info ------------------------------------------------------------------------- */

static const char *source_name(dv_option_source s) {
  switch (s) {
    case DV_SOURCE_DEFAULT: return "default";
    case DV_SOURCE_ENV: return "environment";
    case DV_SOURCE_ENV_NUMBA: return "environment (Numba name)";
    case DV_SOURCE_API: return "api";
  }
  return "?";
}

/* The same, as a key for scripts. */
static const char *source_key(dv_option_source s) {
  switch (s) {
    case DV_SOURCE_DEFAULT: return "default";
    case DV_SOURCE_ENV: return "env";
    case DV_SOURCE_ENV_NUMBA: return "env_numba";
    case DV_SOURCE_API: return "api";
  }
  return "unknown";
}

static void print_size(char *buf, size_t cap, double bytes) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (bytes >= 1024 && i < 4) bytes /= 1024, i++;
  snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", bytes, u[i]);
}

static void print_device(const dv_device_info *d) {
  char mem[32], maxa[32];
  print_size(mem, sizeof mem, (double)d->total_memory);
  print_size(maxa, sizeof maxa, (double)d->max_allocation);
  printf("    device:          %s (%s)\n", d->name, d->vendor);
  printf("    driver:          %s\n", d->driver_version);
  printf("    memory:          %s, largest allocation %s, alignment %llu bytes\n", mem, maxa,
         (unsigned long long)d->base_alignment);
  printf("    mapped memory:   %s; managed memory: %s\n", d->can_map_host_memory ? "yes" : "no",
         d->managed_memory ? "yes" : "no");
  if (d->compute_major) printf("    compute:         %d.%d\n", d->compute_major, d->compute_minor);
  if (d->pci_bus_id[0]) printf("    PCI bus id:      %s\n", d->pci_bus_id);
  printf("    peer access:     %d other device(s)\n", d->peer_devices);
}

static void json_device(FILE *f, const dv_device_info *d) {
  fputs("{\"backend\":", f), json_string(f, d->backend);
  fputs(",\"name\":", f), json_string(f, d->name);
  fputs(",\"vendor\":", f), json_string(f, d->vendor);
  fputs(",\"driver_version\":", f), json_string(f, d->driver_version);
  fprintf(f, ",\"total_memory\":%llu,\"max_allocation\":%llu,\"base_alignment\":%llu",
          (unsigned long long)d->total_memory, (unsigned long long)d->max_allocation,
          (unsigned long long)d->base_alignment);
  fprintf(f, ",\"can_map_host_memory\":%s,\"managed_memory\":%s",
          d->can_map_host_memory ? "true" : "false", d->managed_memory ? "true" : "false");
  if (d->compute_major)
    fprintf(f, ",\"compute_capability\":\"%d.%d\"", d->compute_major, d->compute_minor);
  else
    fputs(",\"compute_capability\":null", f);
  fputs(",\"pci_bus_id\":", f), json_string_or_null(f, d->pci_bus_id[0] ? d->pci_bus_id : NULL);
  fprintf(f, ",\"peer_devices\":%d}", d->peer_devices);
}

/* One compiled-in backend as this machine sees it. */
typedef struct backend_row {
  const char *name;
  dv_status status;  /* DV_OK: a context opened on it */
  char reason[1024]; /* the probe's description, or why the backend is unavailable */
  bool have_device;
  dv_device_info device;
} backend_row;

static void probe_backend(backend_row *b, const char *name) {
  memset(b, 0, sizeof *b);
  b->name = name;
  b->status = dv_backend_probe(name, b->reason, sizeof b->reason);
  if (b->status) return;
  dv_config *cfg = NULL;
  dv_context *ctx = NULL;
  b->status = dv_config_create(&cfg);
  if (!b->status) b->status = dv_config_set(cfg, "backend", name);
  if (!b->status) b->status = dv_context_create(cfg, &ctx);
  dv_config_destroy(cfg);
  if (b->status) {
    snprintf(b->reason, sizeof b->reason, "%s", dv_last_error());
    return;
  }
  b->have_device = dv_context_device_info(ctx, &b->device) == DV_OK;
  dv_context_destroy(ctx);
}

const char info_help[] =
    "Usage: devarray info [--json]\n"
    "\n"
    "The backends compiled in and whether each can be opened on this machine (and\n"
    "why not), their devices and capacities, the backend chosen by default, and\n"
    "every option with its environment variable, value and source.\n"
    "\n"
    "Options:\n"
    "      --json    the same as one JSON object, for scripts: version, backends\n"
    "                (name, available, status, reason, device), devices,\n"
    "                default_backend, kernel_cache (path, entries, bytes, or\n"
    "                error), options (name, env, env_fallback, type, default,\n"
    "                value, source, description)\n"
    "  -h, --help    print this help and exit\n";

int cmd_info(int argc, char **argv) {
  enum { OPT_JSON = 256 };
  static const struct option opts[] = {
      {"json", no_argument, NULL, OPT_JSON}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  bool json = false;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'h': fputs(info_help, stdout); return 0;
      case OPT_JSON: json = true; break;
      default: return try_help(); /* getopt said what was wrong */
    }
  }
  if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);

  size_t nb = dv_backend_count();
  backend_row *rows = calloc(nb ? nb : 1, sizeof *rows);
  if (!rows) {
    errorf("out of memory");
    return EXIT_FAILURE;
  }
  for (size_t i = 0; i < nb; i++) probe_backend(&rows[i], dv_backend_name(i));
  dv_context *ctx = NULL;
  const char *default_backend = NULL;
  char default_error[1024] = "";
  if (dv_context_create(NULL, &ctx) == DV_OK)
    default_backend = dv_context_backend(ctx);
  else
    snprintf(default_error, sizeof default_error, "%s", dv_last_error());
  /* The compiled-module cache of kernels: where, how big (nothing created). */
  char cache_path[4096] = "", cache_error[1024] = "";
  uint64_t cache_entries = 0, cache_bytes = 0;
  if (dv_kernel_cache_info(NULL, cache_path, sizeof cache_path, &cache_entries, &cache_bytes))
    snprintf(cache_error, sizeof cache_error, "%s", dv_last_error());

  if (json) {
    printf("{\"version\":");
    json_string(stdout, dv_version());
    printf(",\"backends\":[");
    int dev = 0;
    for (size_t i = 0; i < nb; i++) {
      const backend_row *b = &rows[i];
      printf("%s{\"name\":", i ? "," : "");
      json_string(stdout, b->name);
      printf(",\"available\":%s,\"status\":\"%s\",\"reason\":", b->status ? "false" : "true",
             dv_status_name(b->status));
      json_string(stdout, b->reason);
      if (b->have_device)
        printf(",\"device\":%d}", dev++);
      else
        printf(",\"device\":null}");
    }
    printf("],\"devices\":[");
    dev = 0;
    for (size_t i = 0; i < nb; i++)
      if (rows[i].have_device) {
        if (dev++) putchar(',');
        json_device(stdout, &rows[i].device);
      }
    {
      char mode[32] = "";
      dv_option_get("host_mode", mode, sizeof mode, NULL);
      printf("],\"host_mode\":");
      json_string(stdout, mode);
    }
    printf(",\"default_backend\":");
    json_string_or_null(stdout, default_backend);
    if (!default_backend) printf(",\"default_error\":"), json_string(stdout, default_error);
    printf(",\"kernel_cache\":{\"path\":");
    json_string_or_null(stdout, cache_error[0] ? NULL : cache_path);
    if (cache_error[0])
      printf(",\"error\":"), json_string(stdout, cache_error);
    else
      printf(",\"entries\":%llu,\"bytes\":%llu", (unsigned long long)cache_entries,
             (unsigned long long)cache_bytes);
    printf("}");
    printf(",\"options\":[");
    for (size_t i = 0, first = 1; i < dv_option_count(); i++) {
      dv_option_info oi;
      char val[1024] = "";
      dv_option_source src = DV_SOURCE_DEFAULT;
      if (dv_option_describe(i, &oi)) continue;
      dv_option_get(oi.name, val, sizeof val, &src);
      printf("%s{\"name\":", first ? "" : ",");
      first = 0;
      json_string(stdout, oi.name);
      printf(",\"env\":"), json_string(stdout, oi.env);
      printf(",\"env_fallback\":"), json_string_or_null(stdout, oi.env_fallback);
      printf(",\"type\":"), json_string(stdout, oi.type);
      printf(",\"default\":"), json_string(stdout, oi.default_value);
      printf(",\"value\":"), json_string(stdout, val);
      printf(",\"source\":\"%s\",\"description\":", source_key(src));
      json_string(stdout, oi.description);
      putchar('}');
    }
    printf("]}\n");
  } else {
    printf("devarray %s\n\nbackends:\n", dv_version());
    for (size_t i = 0; i < nb; i++) {
      const backend_row *b = &rows[i];
      if (b->status) {
        printf("  %-7s unavailable: %s (%s)\n", b->name, b->reason, dv_status_name(b->status));
        continue;
      }
      printf("  %-7s available: %s\n", b->name, b->reason);
      if (b->have_device) print_device(&b->device);
      if (strcmp(b->name, "host") == 0) {
        char mode[32] = "";
        dv_option_get("host_mode", mode, sizeof mode, NULL);
        printf("    mode:            %s (option host_mode: %s)\n", mode,
               strcmp(mode, "fast") == 0
                   ? "kernels as loops over a block's threads, no guard bytes or fills; "
                     "host_mode=checked adds the checks"
                   : "per-thread bookkeeping, guard bytes, poison, quarantine and kernel "
                     "checks; host_mode=fast runs at CPU speed");
      }
    }
    if (default_backend)
      printf(
          "\ndefault backend (backend option \"auto\" picks cuda, hip, an OpenCL GPU, then host): %s\n",
          default_backend);
    else
      printf("\nno default context: %s\n", default_error);
    if (cache_error[0])
      printf("\nkernel cache: unavailable: %s\n", cache_error);
    else
      printf("\nkernel cache: %s (%llu module%s, %.1f KiB)\n", cache_path,
             (unsigned long long)cache_entries, cache_entries == 1 ? "" : "s",
             (double)cache_bytes / 1024.0);
    printf("\noptions (environment variable, value, source):\n");
    for (size_t i = 0; i < dv_option_count(); i++) {
      dv_option_info oi;
      char val[1024] = "";
      dv_option_source src = DV_SOURCE_DEFAULT;
      if (dv_option_describe(i, &oi)) continue;
      dv_option_get(oi.name, val, sizeof val, &src);
      printf("  %-34s %-30s = %-12s (%s)\n", oi.name, oi.env, val[0] ? val : "\"\"",
             source_name(src));
      printf("  %-34s %s%s%s\n", "", oi.description, oi.env_fallback ? "; also " : "",
             oi.env_fallback ? oi.env_fallback : "");
    }
  }
  dv_context_destroy(ctx);
  free(rows);
  return 0;
}
