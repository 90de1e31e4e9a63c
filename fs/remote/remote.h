/* SPDX-License-Identifier: MIT */
/*
 * The remote provider's insides, shared by remote.c (the server, its
 * thread, info) and request.c (one HTTP request: its JSON body, the
 * server-sent events of its answer, its end). Nothing outside these two
 * files includes this header; fs/ sees only fs_provider_remote.
 *
 * One thread per remote model drives every request of that model through
 * one libcurl multi handle, as the scheduler thread of a local model runs
 * every generation of it: the FUSE threads only queue streams and wake it
 * (curl_multi_wakeup).
 */
#ifndef LLMFS_FS_REMOTE_H
#define LLMFS_FS_REMOTE_H

#include <curl/curl.h>

#include "../internal.h"

/* Seconds without a byte from the server before a request fails. */
#define REMOTE_TIMEOUT_DEFAULT 60.0
/* Bytes of an API key, and of its Authorization header. */
#define REMOTE_KEY_MAX 4096
#define REMOTE_KEY_HEADER_MAX (REMOTE_KEY_MAX + 32)

struct remote_req;

struct remote {
	char *url;	/* base URL, no trailing '/' or "/v1" */
	char *model_id; /* model=ID, or what /v1/models names first */
	char *key;	/* the API key (Bearer), or NULL; never shown */
	char *ca_file;	/* ca_file=PATH: the CAs https trusts, or NULL */
	double timeout; /* seconds, timeout=S */
	CURLM *multi;	/* the model thread's own; wake reads it */
	pthread_mutex_t wake_lock; /* multi's lifetime vs remote_wake; a
				      leaf lock, taken under any other */
	struct remote_req *reqs;   /* in flight; the model thread's own */
	struct fs_stream *held;	   /* taken while the probe runs; its own */
	unsigned n_probe;	   /* probes in flight */
	double probe_at;	   /* fs_now() of the last probe */

	/* What /v1/models and /props said; protected by fs_model.lock. */
	bool probed; /* /v1/models answered */
	char probe_error[256];
	struct fs_buf about; /* "key value" lines for the info file */
	uint64_t n_params;
};

enum remote_kind {
	REMOTE_MODELS,	   /* GET /v1/models: the probe */
	REMOTE_PROPS,	   /* GET /props (llama-server only) */
	REMOTE_COMPLETION, /* POST /v1/completions: generate */
	REMOTE_CHAT,	   /* POST /v1/chat/completions: chat */
	REMOTE_TOKENIZE,   /* POST /tokenize */
};

struct remote_req {
	struct fs_model *fm;
	enum remote_kind kind;
	struct fs_stream *s; /* a reference; NULL for probes */
	CURL *easy;
	struct curl_slist *headers;
	char *body;	  /* the JSON sent, or NULL for a GET */
	struct fs_buf in; /* SSE: bytes before the next '\n';
			     otherwise the whole answer */
	long status;	  /* HTTP status, once known */
	bool done;	  /* finish_reason or [DONE] arrived */
	int error;	  /* negative errno from the answer */
	char msg[256];	  /* why, for the errors line */
	char curl_error[CURL_ERROR_SIZE];
	double t_start, t_first, t_last; /* fs_now(): sent, text in */
	double t_active;		 /* fs_now() of the last byte in */
	uint32_t n_pieces;		 /* events that carried text */
	uint32_t n_prompt, n_gen;	 /* "usage", when the server sends it */
	struct remote_req *next;
};

/*
 * request.c. remote_req_new() makes the request of a stream (s) or a
 * probe (s NULL), adds it to r->multi and to r->reqs; it returns 0 or a
 * negative errno (then s is not taken and the caller ends it).
 */
int remote_req_new(struct fs_model *fm, enum remote_kind kind,
		   struct fs_stream *s);
/* A request that curl finished with result; ends it and frees it. */
void remote_req_done(struct remote_req *q, CURLcode result);
/* Abort and free: the stream (if any) ends with error. */
void remote_req_abort(struct remote_req *q, int error);
/* Fail with ETIMEDOUT if no byte came for timeout seconds; returns the
 * seconds left until then otherwise (q is gone when it returns <= 0). */
double remote_req_expire(struct remote_req *q, double now, double timeout);

/* remote.c: the probe answers (fs_model.lock not held). */
void remote_probe_models(struct fs_model *fm, struct remote_req *q);
void remote_probe_props(struct fs_model *fm, struct remote_req *q);

#endif
