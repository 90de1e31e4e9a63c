// SPDX-License-Identifier: MIT
/*
 * The text of the generated read-only files: models, status, metrics (the
 * Prometheus text format, version 0.0.4), and per model stats (a model's
 * info, its models line and weights/index are its provider's:
 * fs/local/info.c, fs/remote/remote.c). Formats are in Documentation/ABI.md; every line is
 * "key value" or a table row with a fixed column order, so that shell
 * tools can cut it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "store.h"

static const char *const text_states[] = {
	[FS_MODEL_LOADING] = "loading",
	[FS_MODEL_READY] = "ready",
	[FS_MODEL_FAILED] = "failed",
};

const char *fs_model_state_name(enum fs_model_state st)
{
	return text_states[st];
}

int fs_text_models(struct fs *fs, struct fs_buf *b)
{
	struct fs_model *fm;
	int rc = 0;

	for (unsigned i = 0; i < fs->n_models && !rc; i++) {
		if (!(fm = fs_model_get(fs, i, false)))
			continue;
		rc = fm->provider->models_line(fm, b);
		fs_model_put(fm);
	}
	return rc;
}

static long long text_meminfo(const char *key)
{
	char line[256];
	long long kb = -1;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			kb = atoll(line + n + 1);
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

static long long text_rss(void)
{
	long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return -1;
	if (fscanf(f, "%*s %lld", &pages) != 1)
		pages = -1;
	fclose(f);
	return pages < 0 ? -1 : pages * sysconf(_SC_PAGESIZE);
}

/* One "device gpuN" line per GPU: name, compute capability, memory. */
static int text_gpus(const struct io_device_set *set, struct fs_buf *b)
{
	int rc = 0;

	for (uint32_t k = 0; k < set->n && !rc; k++) {
		const struct io_device *d = &set->dev[k];

		if (d->kind != IO_DEVICE_GPU)
			continue;
		rc = fs_buf_printf(b, "device %s name=%s cc=", d->name,
				   d->model[0] ? d->model : "-");
		if (!rc && d->cc_major)
			rc = fs_buf_printf(b, "%d.%d", d->cc_major,
					   d->cc_minor);
		else if (!rc)
			rc = fs_buf_printf(b, "-");
		if (!rc)
			rc = fs_buf_printf(b,
					   " memory_total_bytes=%llu "
					   "memory_free_bytes=%llu%s%s%s\n",
					   (unsigned long long)d->total_bytes,
					   (unsigned long long)d->free_bytes,
					   d->simulated ? " simulated" : "",
					   d->capped ? " capped" : "",
					   d->compute ? "" : " no-backend");
	}
	return rc;
}

/*
 * Each ready model's plan: "model NAME " before each line of it (the
 * estimate of every alternative, the measured speeds, the costs).
 */
static int text_plans(struct fs *fs, struct fs_buf *b)
{
	struct fs_model *fm;
	struct err err = { 0 };
	char text[3072], *line, *save;
	bool ready;
	int rc = 0;

	for (unsigned i = 0; i < fs->n_models && !rc; i++) {
		if (!(fm = fs_model_get(fs, i, false)))
			continue;
		pthread_mutex_lock(&fm->lock);
		ready = fm->state == FS_MODEL_READY;
		pthread_mutex_unlock(&fm->lock);
		if (ready && fm->provider->plan &&
		    fm->provider->plan(fm, text, sizeof(text), &err) == 0) {
			for (line = strtok_r(text, "\n", &save); line && !rc;
			     line = strtok_r(NULL, "\n", &save))
				rc = fs_buf_printf(b, "model %s %s\n", fm->name,
						   line);
		}
		fs_model_put(fm);
	}
	return rc;
}

int fs_text_status(struct fs *fs, struct fs_buf *b)
{
	unsigned counts[3] = { 0 }, sessions = 0, active = 0;
	struct fs_model *fm;
	int rc;

	rc = fs_buf_printf(
		b,
		"uptime_s %.0f\nmemory_rss_bytes %lld\nmemory_total_bytes %lld\n"
		"memory_available_bytes %lld\ndevice cpu threads=%ld%s\n",
		fs_now() - fs->start, text_rss(), text_meminfo("MemTotal"),
		text_meminfo("MemAvailable"),
		fs->opt.threads ? (long)fs->opt.threads :
				  sysconf(_SC_NPROCESSORS_ONLN),
		fs->opt.ro ? " ro" : "");
	if (!rc)
		rc = text_gpus(&fs->opt.devices, b);
	for (unsigned i = 0; i < fs->n_models && !rc; i++) {
		double secs;

		if (!(fm = fs_model_get(fs, i, false)))
			continue;
		pthread_mutex_lock(&fm->lock);
		counts[fm->state]++;
		active += fm->stats.active;
		for (struct fs_session *ss = fm->sessions; ss; ss = ss->next)
			sessions += !ss->removed;
		if (fm->state == FS_MODEL_LOADING) {
			secs = fm->load_start ? fs_now() - fm->load_start : 0;
			rc = fs_buf_printf(
				b, "load %s %llu/%llu bytes %.2f GB/s %.1f s\n",
				fm->name, (unsigned long long)fm->load_done,
				(unsigned long long)fm->load_total,
				secs > 0 ? fm->load_done / secs / 1e9 : 0.0,
				secs);
		}
		pthread_mutex_unlock(&fm->lock);
		fs_model_put(fm);
	}
	if (!rc)
		rc = text_plans(fs, b);
	if (!rc)
		rc = fs_buf_printf(
			b,
			"models %u\nmodels_ready %u\n"
			"models_loading %u\nmodels_failed %u\nsessions %u\n"
			"generations_active %u\n",
			counts[FS_MODEL_LOADING] + counts[FS_MODEL_READY] +
				counts[FS_MODEL_FAILED],
			counts[FS_MODEL_READY], counts[FS_MODEL_LOADING],
			counts[FS_MODEL_FAILED], sessions, active);
	if (!rc)
		rc = fs_budget_text(fs, b);
	return rc;
}

static int text_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of the last ttfts; fm->lock held. */
static double text_ttft_p50(const struct fs_stats *x)
{
	double v[256];
	unsigned n = x->n_ttft < 256 ? x->n_ttft : 256;

	if (!n)
		return 0;
	memcpy(v, x->ttft_ms, n * sizeof(*v));
	qsort(v, n, sizeof(*v), text_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int fs_text_stats(struct fs_model *fm, struct fs_buf *b)
{
	struct fs_stats *x = &fm->stats;
	int rc;

	pthread_mutex_lock(&fm->lock);
	rc = fs_buf_printf(
		b,
		"state %s\nrequests %llu\nactive %u\nfailed %llu\n"
		"cancelled %llu\ntokens_in %llu\ntokens_out %llu\n"
		"ttft_ms_last %.2f\nttft_ms_p50 %.2f\nprefill_tps %.2f\n"
		"decode_tps %.2f\nload_s %.3f\nload_bytes %llu\n"
		"tokens_in_evaluated %llu\n",
		text_states[fm->state], (unsigned long long)x->requests,
		x->active, (unsigned long long)x->failed,
		(unsigned long long)x->cancelled,
		(unsigned long long)x->tokens_in,
		(unsigned long long)x->tokens_out, x->ttft_last_ms,
		text_ttft_p50(x), x->prefill_tps, x->decode_tps, fm->load_secs,
		(unsigned long long)fm->load_done,
		(unsigned long long)x->tokens_in_evaluated);
	if (!rc && fm->provider->stats)
		rc = fm->provider->stats(fm, b);
	if (!rc && fs_provider_has(fm, FS_KIND_KV))
		rc = fs_buf_printf(b, "kv_waiting %u\nkv_waited %llu\n",
				   x->kv_waiting,
				   (unsigned long long)x->kv_waited);
	pthread_mutex_unlock(&fm->lock);
	return rc;
}

static int text_metric(struct fs_buf *b, const char *name, const char *type,
		       const char *help)
{
	return fs_buf_printf(b, "# HELP llmfs_%s %s\n# TYPE llmfs_%s %s\n",
			     name, help, name, type);
}

int fs_text_metrics(struct fs *fs, struct fs_buf *b)
{
	static const struct {
		const char *name, *type, *help;
	} m[] = {
		{ "model_state", "gauge", "0 loading, 1 ready, 2 failed" },
		{ "requests_total", "counter", "generations submitted" },
		{ "requests_failed_total", "counter",
		  "generations that failed" },
		{ "requests_cancelled_total", "counter",
		  "generations cancelled by their reader" },
		{ "generations_active", "gauge", "generations running now" },
		{ "prompt_tokens_total", "counter", "prompt tokens evaluated" },
		{ "generated_tokens_total", "counter", "tokens generated" },
		{ "decode_seconds_total", "counter",
		  "time spent decoding after the first token" },
		{ "ttft_seconds", "gauge",
		  "time to first token, last request" },
		{ "decode_tokens_per_second", "gauge",
		  "decode speed of the last request" },
		{ "load_seconds", "gauge", "time the load took" },
		{ "errors_total", "counter",
		  "lines written to the errors file" },
	};
	int rc = 0;

	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]) && !rc; k++) {
		rc = text_metric(b, m[k].name, m[k].type, m[k].help);
		for (unsigned i = 0; i < fs->n_models && !rc; i++) {
			struct fs_model *fm = fs_model_get(fs, i, false);
			struct fs_stats *x;
			double v[12];

			if (!fm)
				continue;
			x = &fm->stats;
			pthread_mutex_lock(&fm->lock);
			v[0] = fm->state;
			v[1] = x->requests;
			v[2] = x->failed;
			v[3] = x->cancelled;
			v[4] = x->active;
			v[5] = x->tokens_in;
			v[6] = x->tokens_out;
			v[7] = x->decode_secs;
			v[8] = x->ttft_last_ms / 1e3;
			v[9] = x->decode_tps;
			v[10] = fm->load_secs;
			v[11] = fm->errors.total;
			rc = fs_buf_printf(b, "llmfs_%s{model=\"%s\"} %.9g\n",
					   m[k].name, fm->name, v[k]);
			pthread_mutex_unlock(&fm->lock);
			fs_model_put(fm);
		}
	}
	return rc;
}
