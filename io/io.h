/* SPDX-License-Identifier: MIT */
/*
 * io: everything that touches a file or owns weight memory.
 *
 *   err        one error code and one human message, filled by the function
 *              that detects a failure (see ../shared/STYLE.md, section 3)
 *   types      ggml's tensor element types as GGUF files number them
 *   gguf       the GGUF v2/v3 reader: metadata and tensor infos, every size
 *              and offset checked against the file before it is believed
 *   weights    tensor bytes streamed from the file (io_uring + O_DIRECT,
 *              buffered pread as fallback) into the memory they are computed
 *              from; one placement record per tensor says where they live
 *
 * io/ never sees a tensor operation: engine/ holds views into the memory
 * owned here and never frees them.
 *
 * Every function that can fail returns 0 (or a count) on success and a
 * negative errno on failure, after writing one line into *err.
 */
#ifndef LLMFS_IO_H
#define LLMFS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------ */

struct err {
	int code;      /* positive errno of the last failure, 0 if none */
	char msg[512]; /* one line, no trailing newline */
};

/*
 * Record a failure: err->code = code, err->msg = the formatted message.
 * Returns -code so that callers can write `return err_set(err, EINVAL, ...)`.
 * err may be NULL (the message is then dropped).
 */
int err_set(struct err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- tensor element types ---------------------------------------------- */

/* The values are ggml's enum ggml_type, as stored in GGUF tensor infos. */
enum io_type {
	IO_TYPE_F32 = 0,
	IO_TYPE_F16 = 1,
	IO_TYPE_Q4_0 = 2,
	IO_TYPE_Q4_1 = 3,
	IO_TYPE_Q5_0 = 6,
	IO_TYPE_Q5_1 = 7,
	IO_TYPE_Q8_0 = 8,
	IO_TYPE_Q8_1 = 9,
	IO_TYPE_Q2_K = 10,
	IO_TYPE_Q3_K = 11,
	IO_TYPE_Q4_K = 12,
	IO_TYPE_Q5_K = 13,
	IO_TYPE_Q6_K = 14,
	IO_TYPE_Q8_K = 15,
	IO_TYPE_I8 = 24,
	IO_TYPE_I16 = 25,
	IO_TYPE_I32 = 26,
	IO_TYPE_I64 = 27,
	IO_TYPE_F64 = 28,
	IO_TYPE_BF16 = 30,
	IO_TYPE_COUNT = 31,
};

struct io_type_info {
	const char *name;     /* "q4_K", as ggml names it */
	uint32_t block_elems; /* elements per block (1 for plain types) */
	uint32_t block_bytes; /* bytes per block */
};

/*
 * The layout of a type, or NULL for a type number this build does not know
 * (the caller reports it as unsupported; never index a table with it).
 */
const struct io_type_info *io_type_info(uint32_t type);

/*
 * Bytes of a row of n elements of the given type into *bytes.
 * -EINVAL if the type is unknown or n is not a multiple of its block size,
 * -EOVERFLOW if the size does not fit.
 */
int io_type_row_bytes(uint32_t type, int64_t n, uint64_t *bytes);

/* ---- GGUF -------------------------------------------------------------- */

enum io_gguf_value_type {
	IO_GGUF_UINT8 = 0,
	IO_GGUF_INT8 = 1,
	IO_GGUF_UINT16 = 2,
	IO_GGUF_INT16 = 3,
	IO_GGUF_UINT32 = 4,
	IO_GGUF_INT32 = 5,
	IO_GGUF_FLOAT32 = 6,
	IO_GGUF_BOOL = 7,
	IO_GGUF_STRING = 8,
	IO_GGUF_ARRAY = 9,
	IO_GGUF_UINT64 = 10,
	IO_GGUF_INT64 = 11,
	IO_GGUF_FLOAT64 = 12,
};

struct io_gguf_string {
	uint64_t len;
	char *data; /* len bytes plus a terminating NUL (may hold inner NULs) */
};

struct io_gguf_array {
	enum io_gguf_value_type type; /* of the elements */
	uint64_t n;
	/*
	 * n elements: packed little-endian numbers of the element type
	 * (bool = one byte), struct io_gguf_string for strings, or
	 * struct io_gguf_array for nested arrays.
	 */
	void *data;
};

struct io_gguf_value {
	enum io_gguf_value_type type;
	union {
		uint64_t u64; /* every unsigned integer type */
		int64_t i64;  /* every signed integer type */
		double f64;   /* FLOAT32 and FLOAT64 */
		bool b;
		struct io_gguf_string str;
		struct io_gguf_array arr;
	};
};

struct io_gguf_kv {
	char *key;
	struct io_gguf_value value;
};

#define IO_GGUF_MAX_DIMS 4

struct io_gguf_tensor {
	char *name;
	uint32_t type; /* enum io_type, known to io_type_info */
	uint32_t n_dims;
	int64_t ne[IO_GGUF_MAX_DIMS]; /* elements per dimension, unused = 1 */
	uint32_t file;		      /* index into io_gguf.files */
	uint64_t offset;	      /* absolute byte offset in that file */
	uint64_t bytes;
};

struct io_gguf_file {
	char *path;
	uint64_t size;
	uint64_t data_offset; /* where the aligned tensor data section starts */
};

/*
 * A parsed GGUF model: metadata and tensor infos, nothing of the tensor data.
 * A split model (NAME-00001-of-0000N.gguf) is opened from its first part
 * and reads as one: files[] lists the parts, tensors[] all their tensors.
 */
struct io_gguf {
	uint32_t version;
	uint32_t alignment;
	uint32_t n_files;
	struct io_gguf_file *files;
	uint64_t n_kv;
	struct io_gguf_kv *kv;
	uint64_t n_tensors;
	struct io_gguf_tensor *tensors;
	uint64_t tensor_bytes; /* sum of tensors[].bytes */
};

/*
 * Parse the GGUF file at path. On success *out owns everything it points
 * to; release it with io_gguf_close(). On failure *out is NULL, the return
 * is -EINVAL (malformed), -ENOMEM, -EOVERFLOW or the errno of open/read, and
 * err names the file and the problem.
 */
int io_gguf_open(struct io_gguf **out, const char *path, struct err *err);
void io_gguf_close(struct io_gguf *g);

/* NULL if absent. */
const struct io_gguf_kv *io_gguf_find(const struct io_gguf *g, const char *key);

/*
 * Typed getters. 0 on success; -ENOENT if the key is absent; -EINVAL if its
 * value has another type or does not fit the output (any integer type is
 * accepted by the integer getters when the value fits).
 */
int io_gguf_get_u32(const struct io_gguf *g, const char *key, uint32_t *out);
int io_gguf_get_i32(const struct io_gguf *g, const char *key, int32_t *out);
int io_gguf_get_f32(const struct io_gguf *g, const char *key, float *out);
int io_gguf_get_bool(const struct io_gguf *g, const char *key, bool *out);
/* The string value (borrowed from g), or NULL if absent or not a string. */
const char *io_gguf_get_str(const struct io_gguf *g, const char *key);
/* The array value if present with elements of elem_type, else NULL. */
const struct io_gguf_array *
io_gguf_get_array(const struct io_gguf *g, const char *key,
		  enum io_gguf_value_type elem_type);

/* NULL if no tensor has that name. */
const struct io_gguf_tensor *io_gguf_find_tensor(const struct io_gguf *g,
						 const char *name);

/*
 * The file type (llama.cpp's llama_ftype: 15 is Q4_K_M): general.file_type,
 * or, when the file has none, llama.cpp's guess from the type of the most
 * tensors, with *guessed set (ftype.c).
 */
uint32_t io_gguf_ftype(const struct io_gguf *g, bool *guessed);
/* Its name as llama-quantize and Ollama write it: "Q4_K_M", "F16",
 * "unknown" for a number this build does not know. */
const char *io_ftype_name(uint32_t ftype);

/* ---- GGUF writer ------------------------------------------------------- */

/*
 * A GGUF v3 file written in one pass, as ggml's gguf.cpp lays it out:
 * declare every key and every tensor first, then io_gguf_writer_begin()
 * writes the header, metadata and tensor infos, then the tensors' bytes
 * are streamed in declaration order with io_gguf_writer_write() (any chunk
 * sizes; the writer pads each tensor to the alignment), and
 * io_gguf_writer_finish() checks that every byte came. Memory use does not
 * grow with the tensor data.
 */
struct io_gguf_writer;

/* alignment: a power of two, 0 for GGUF's default 32 (written as
 * general.alignment otherwise). */
int io_gguf_writer_new(struct io_gguf_writer **out, uint32_t alignment,
		       struct err *err);
/* Frees w; a file begun but not finished is closed and removed. */
void io_gguf_writer_free(struct io_gguf_writer *w);

/*
 * Add a key (copied, with everything its value points to). -EINVAL for a
 * duplicate or empty key, an invalid value type, or after begin.
 */
int io_gguf_writer_add(struct io_gguf_writer *w, const char *key,
		       const struct io_gguf_value *v, struct err *err);
int io_gguf_writer_add_u32(struct io_gguf_writer *w, const char *key,
			   uint32_t v, struct err *err);
int io_gguf_writer_add_i32(struct io_gguf_writer *w, const char *key, int32_t v,
			   struct err *err);
int io_gguf_writer_add_f32(struct io_gguf_writer *w, const char *key, float v,
			   struct err *err);
int io_gguf_writer_add_bool(struct io_gguf_writer *w, const char *key, bool v,
			    struct err *err);
int io_gguf_writer_add_str(struct io_gguf_writer *w, const char *key,
			   const char *s, struct err *err);
/*
 * An array of n elements: packed numbers of elem_type (bool = one byte),
 * or, for IO_GGUF_STRING, data is const char *const[n] (NUL-terminated).
 */
int io_gguf_writer_add_array(struct io_gguf_writer *w, const char *key,
			     enum io_gguf_value_type elem_type,
			     const void *data, uint64_t n, struct err *err);

/*
 * Declare the next tensor: ne[0..n_dims-1] > 0, n_dims <= 4, ne[0] a
 * multiple of the type's block. Its bytes follow the previous tensor's,
 * aligned. -EINVAL on a duplicate name or a bad shape.
 */
int io_gguf_writer_add_tensor(struct io_gguf_writer *w, const char *name,
			      uint32_t type, uint32_t n_dims, const int64_t *ne,
			      struct err *err);

/* Create path (truncating it) and write everything before the data. */
int io_gguf_writer_begin(struct io_gguf_writer *w, const char *path,
			 struct err *err);
/* The next n bytes of tensor data; -EINVAL past the last tensor's end. */
int io_gguf_writer_write(struct io_gguf_writer *w, const void *data, size_t n,
			 struct err *err);
/* -EINVAL if some tensor bytes are missing; flushes and closes the file. */
int io_gguf_writer_finish(struct io_gguf_writer *w, struct err *err);

/* ---- weights: tensor bytes in compute memory --------------------------- */

/*
 * Where one tensor's bytes live. The engine reaches every tensor through its
 * record and reads data at each use, never caching the pointer across
 * forward passes, so that the bytes can move (io_weights_move) while the
 * model stays loaded. Records are owned by struct io_weights.
 */
struct io_placement {
	void *data;
	uint64_t bytes;
	char device[16]; /* "cpu", "numa0", "gpu0" */
	/*
	 * Set (release) once the bytes are in. Always set after a plain
	 * io_weights_load; with io_load_options.async, readers call
	 * io_placement_wait() before their first use of the tensor.
	 */
	uint32_t ready;
	/*
	 * 0: data holds the file's bytes. Otherwise the engine rearranged
	 * them in place for its kernels (its own number for the layout; a
	 * move copies them as they are) and reads them back in the file's
	 * order with engine_tensor_read().
	 */
	uint32_t layout;
	struct io_weights *owner;
};

int io_placement_wait_slow(const struct io_placement *p);
/*
 * Block until p's bytes are in: 0, or the negative errno of a failed load.
 * One atomic load when they are.
 */
static inline int io_placement_wait(const struct io_placement *p)
{
	if (__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE))
		return 0;
	return io_placement_wait_slow(p);
}

struct io_device_set;

enum io_numa_policy {
	IO_NUMA_DEFAULT = 0, /* the kernel's first touch */
	IO_NUMA_INTERLEAVE,
	IO_NUMA_NODE,	   /* all on io_load_options.numa_node */
	IO_NUMA_REPLICATE, /* one copy per node */
};

struct io_load_options {
	bool no_uring;	/* force the pread path (O_DIRECT still allowed) */
	bool no_direct; /* force buffered reads through the page cache */
	uint32_t queue_depth; /* reads in flight; 0 = default */
	enum io_numa_policy numa;
	int numa_node;
	/*
	 * Called as bytes arrive, from a loading thread (one call at a time,
	 * possibly from different reader threads); may be NULL.
	 */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/*
	 * Called with one line (no newline) when loading falls back to a slower
	 * path or degrades (io_uring refused, O_DIRECT refused, memory not
	 * locked); may be NULL. The engine logs it, tools print it to stderr.
	 */
	void (*notice)(void *arg, const char *msg);
	void *notice_arg;
	bool no_lock;	   /* do not mlock the weights */
	uint32_t read_kib; /* bytes per read in KiB (4..65536); 0 = 8192 */
	/*
	 * Return from io_weights_load as soon as the memory is mapped and let
	 * a loader thread read; tensors become ready (io_placement_wait) in
	 * file order, so that a first forward pass can run behind the disk.
	 * Progress and notices then come from the loader thread.
	 */
	bool async;
	/*
	 * Read with O_DIRECT even when a file is (nearly) all in the page
	 * cache, where the loader would otherwise copy from the cache.
	 */
	bool always_direct;
	/*
	 * The devices tensors may be moved to (copied into the weights);
	 * NULL: the machine's, with LLMFS_DEVICES.
	 */
	const struct io_device_set *devices;
	/*
	 * Read nothing yet: io_weights_load makes the records (data NULL)
	 * and returns; the caller may then give tensors memory of another
	 * device (io_weights_detach) and starts the reading with
	 * io_weights_start, which reads those straight into it.
	 */
	bool defer;
};
/*
 * The environment overrides the options, for tests and benchmarks of the
 * layers above: LLMFS_NO_URING=1, LLMFS_NO_DIRECT=1, LLMFS_IO_CHUNK_KB=N.
 * The defaults (16 reads of 8 MiB in flight) were measured best on a
 * virtio disk and are fine for NVMe; see Documentation/loading.md.
 */

struct io_weights;

/*
 * Read the data of every tensor of g into compute memory. g must outlive
 * the weights. On failure *out is NULL and err says why. With opt->async
 * it returns once the memory is mapped; read failures then come through
 * io_placement_wait() and io_weights_wait().
 */
int io_weights_load(struct io_weights **out, const struct io_gguf *g,
		    const struct io_load_options *opt, struct err *err);
void io_weights_free(struct io_weights *w);

/*
 * Where a deferred load (io_load_options.defer) gets the bytes of a tensor
 * detached to another device: a staging sink for device (its page-locked
 * buffers and copies, io_stage_file), filled into *sink; its arg must stay
 * valid until io_weights_start returns. 0 or a negative errno with err.
 */
struct io_stage_sink;
typedef int (*io_weights_sink_fn)(void *arg, const char *device,
				  struct io_stage_sink *sink, struct err *err);

/*
 * Start a deferred load. First the tensors detached to other devices
 * (io_weights_detach before the start) are read from the file straight
 * into their memory through sink_of's staging ring, ready when this
 * returns; then the rest is read into io/'s memory as io_weights_load
 * reads it (behind, with opt->async), leaving out the file ranges the
 * detached tensors occupy. Progress counts both. 0, or a negative errno
 * (a short read is -EINVAL naming the file) with err; the load has then
 * failed as a whole (io_weights_wait says so) and the caller frees w and
 * its own memory. -EINVAL if w was not deferred or was started.
 */
int io_weights_start(struct io_weights *w, io_weights_sink_fn sink_of,
		     void *arg, struct err *err);
/* Whether w's reading has begun (always, unless deferred and not started). */
bool io_weights_started(const struct io_weights *w);

/* The placement record of g->tensors[i]; owned by w. */
struct io_placement *io_weights_placement(struct io_weights *w, uint64_t i);

/*
 * Wait for an async load to end (at once for a plain one): 0, or its
 * negative errno with its message in err.
 */
int io_weights_wait(struct io_weights *w, struct err *err);

/*
 * Merge the next up to max_bytes of w's memory into huge pages now
 * (io_mem_collapse), a step at a time for a caller with nothing better to
 * do (the daemon's scheduler when idle): 1 while some is left, 0 when all
 * is done, -EOPNOTSUPP (once; 0 after) when the kernel cannot (before
 * 6.1: khugepaged is left to it). *merged: the bytes of whole huge pages
 * this step merged (0 where it skipped a range the kernel refused, such as
 * pages pinned for CUDA). Not while another thread moves tensors (the
 * regions change); the bytes themselves never do.
 */
int io_weights_collapse_step(struct io_weights *w, size_t max_bytes,
			     size_t *merged);

/* How the last load went, for tools and the status file. */
struct io_load_stats {
	uint64_t bytes;		 /* read from the files (aligned superset) */
	uint64_t tensor_bytes;	 /* sum of the tensors' bytes */
	double seconds;		 /* allocation + reads, wall clock */
	double alloc_seconds;	 /* ... of which mapping the regions */
	double register_seconds; /* ... setting up the ring, pinning buffers */
	double read_seconds;	 /* ... the reads themselves */
	bool uring;		 /* io_uring did the reads */
	bool fixed;		 /* ... into registered buffers (read_fixed) */
	bool direct;		 /* O_DIRECT, bypassing the page cache */
	bool cached;	      /* a file was in the page cache: copied from it */
	bool locked;	      /* every region is mlocked */
	uint32_t queue_depth; /* reads in flight at most */
	uint32_t n_copies;    /* 1, or the node count with IO_NUMA_REPLICATE */
	bool cuda_pinned;     /* page-locked for CUDA (-DLLMFS_CUDA builds) */
	/* tensors read straight into another device's memory (deferred) */
	uint64_t staged_bytes;	    /* their bytes */
	uint64_t stage_ring_bytes;  /* the staging ring's host buffers */
	double stage_seconds;	    /* all of the staging */
	double stage_read_seconds;  /* ... waiting for the disk */
	double stage_wait_seconds;  /* ... waiting for the device's copies */
	uint64_t host_region_bytes; /* io/'s memory the load mapped */
};
const struct io_load_stats *io_weights_stats(const struct io_weights *w);

/*
 * The copy of tensor i that threads running on NUMA node `node` should
 * read: their node's own copy with IO_NUMA_REPLICATE, else the one record
 * (also for node < 0). NULL if i is out of range.
 */
struct io_placement *io_weights_placement_node(struct io_weights *w, uint64_t i,
					       int node);

/* ---- staging: file bytes to another device's memory ------------------- */

/*
 * The device's side of io_stage_file (the CUDA module fills it in; io/
 * never calls a device itself). slot < 16 names the ring buffer a copy
 * reads from.
 */
struct io_stage_sink {
	void *arg;
	/* n bytes of page-locked host memory, 4096-aligned */
	int (*host_alloc)(void *arg, void **p, size_t n, struct err *err);
	void (*host_free)(void *arg, void *p);
	/* start copying n bytes from src (in buffer slot) to dst */
	int (*copy)(void *arg, void *dst, const void *src, size_t n,
		    unsigned slot, struct err *err);
	/* return when every copy started from buffer slot is done */
	int (*wait)(void *arg, unsigned slot, struct err *err);
};

/* File bytes [off, off + len) to dst (the device's memory). */
struct io_stage_range {
	uint64_t off, len;
	void *dst;
};

struct io_stage_options {
	uint32_t n_bufs;  /* ring buffers, 1..16; 0: 4 */
	size_t buf_bytes; /* each, a multiple of 4096; 0: 64 MiB */
	bool no_uring;	  /* pread instead (also LLMFS_NO_URING=1) */
	bool no_direct;	  /* the page cache (also LLMFS_NO_DIRECT=1) */
	/* after each buffer: bytes copied so far of all */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
};

struct io_stage_stats {
	uint64_t bytes_read;   /* from the file, aligned windows */
	uint64_t bytes_copied; /* to the device: the ranges' bytes */
	double seconds;	       /* all of it */
	double read_seconds;   /* ... waiting for the disk */
	double wait_seconds;   /* ... waiting for the device's copies */
	bool uring, direct;
};

/*
 * Copy the n ranges of the file at path to their destinations through a
 * ring of sink's page-locked buffers: io_uring O_DIRECT reads into one
 * buffer while the device copies out of the others (io/stage.c). Ranges
 * come in any order and may overlap. Falls back to pread and to the
 * page cache as the weights' loader does. On return every copy is done.
 * 0, or a negative errno: -EINVAL (bad options or ranges, or the file
 * ends before a range), the read's or the sink's error. st may be NULL.
 */
int io_stage_file(const char *path, const struct io_stage_range *ranges,
		  size_t n, const struct io_stage_sink *sink,
		  const struct io_stage_options *opt, struct io_stage_stats *st,
		  struct err *err);

/* ---- devices ----------------------------------------------------------- */

/*
 * The least rate (bytes/s) a description gives (bw=, pcie=, product=):
 * below it a value is taken for a slip of the unit (product=900 meant
 * 900G). A rate measured under it (the module's simulator measures kB/s
 * products) is no description's: llmfs-gpus leaves it out of its text.
 */
#define IO_DEVICE_RATE_MIN 1e6

/*
 * What the machine has to hold and compute weights: "cpu" (all host memory,
 * the kernel's first touch), one "numaN" per NUMA node, and "gpuN". Host
 * devices are read from the machine; GPUs are found by the CUDA module's
 * probe (engine_gpu_probe) or described (io/device.c has the syntax): a
 * described GPU is `simulated`, listed and planned for, and takes weights
 * only where the CUDA backend opens a GPU of that name. A description
 * with only vram= caps a real card instead (`capped`).
 */
enum io_device_kind {
	IO_DEVICE_CPU,
	IO_DEVICE_NUMA,
	IO_DEVICE_GPU,
};

enum io_bw_source {
	IO_BW_UNKNOWN,
	IO_BW_GIVEN,	/* --devices / LLMFS_DEVICES */
	IO_BW_MEASURED, /* io_device_set_measure read memory */
	IO_BW_DERIVED,	/* a node's share of the measured machine figure */
};

/* A rate and where it came from (C++ sees it outside io_device too). */
struct io_device_rate {
	double bw; /* bytes/s; 0 unknown */
	enum io_bw_source source;
};

struct io_device {
	enum io_device_kind kind;
	int index;	      /* numa: the node id; gpu: N of gpuN; cpu: -1 */
	char name[16];	      /* "cpu", "numa0", "gpu0" */
	char model[32];	      /* gpu: its name if given ("RTX-4060") */
	uint64_t total_bytes; /* memory of the device */
	uint64_t free_bytes;  /* ... free when the set was read */
	int node;	      /* NUMA node of its memory / PCI slot; -1 any */
	uint32_t n_cpus;      /* host devices: CPUs that compute there */
	double mem_bw;	      /* bytes/s reading its memory; 0 unknown */
	enum io_bw_source bw_source;
	double link_bw; /* gpu: host <-> device bytes/s (PCIe) */
	/*
	 * gpu: bytes/s of weights its decode product reads (a matrix times
	 * one row, the mat-vec kernel a step spends most of its time in);
	 * 0 unknown. What the planner divides a GPU's bytes by: a kernel
	 * that computes reads slower than one that only reads, and each
	 * weight type's kernel at its own rate. product_type[t]: type t's
	 * (the probe times Q4_K, Q6_K, Q8_0, F16, BF16; product.q8_0=
	 * gives one); product_bw: every other type's (the probe's Q4_K
	 * rate; product= gives it, and then stands for every type not given
	 * its own). io_device_product_rate() picks.
	 */
	double product_bw;
	enum io_bw_source product_source;
	struct io_device_rate product_type[IO_TYPE_COUNT];
	int cc_major, cc_minor; /* gpu: compute capability if given */
	bool simulated;		/* described, not found on the machine */
	bool compute;		/* a backend can compute here (false: gpu) */
	/*
	 * gpu: total_bytes is a cap on a real card (`gpu0:vram=8G` without
	 * bw= and pcie=): what llmfs may place there. Until a probe finds
	 * the card (engine_gpu_probe) it has no bandwidths and no compute.
	 */
	bool capped;
	/*
	 * Measured costs the planner takes over its defaults; 0: none. A
	 * host device's step_s is all-cpu's (cpu:step=).
	 */
	double step_s;	/* fixed cost of a decode step (launches) */
	double cross_s; /* one host <-> GPU hand-over besides its bytes */
	/*
	 * gpu: the VRAM the runtime took when a backend opened it (its CUDA
	 * context, the module's code and buffers), beyond what free_bytes
	 * already leaves out; the planner's reserve where reserve_measured
	 */
	uint64_t reserve_bytes;
	bool reserve_measured;
};

#define IO_DEVICE_MAX 16

struct io_device_set {
	uint32_t n;
	struct io_device dev[IO_DEVICE_MAX]; /* cpu first, then numaN, gpuN */
	char spec[256];			     /* the description, if any */
};

/*
 * The machine's host devices plus those spec describes (NULL: the
 * environment's LLMFS_DEVICES; "": none). -EINVAL with a one-line message
 * for a bad description. Host bandwidths stay unknown until measured.
 */
int io_device_set_read(struct io_device_set *set, const char *spec,
		       struct err *err);
/* Measure what is unknown: the host's read bandwidth (~0.1 s), nodes' shares. */
void io_device_set_measure(struct io_device_set *set);
/* The device of that name, or NULL. Points into set. */
const struct io_device *io_device_find(const struct io_device_set *set,
				       const char *name);
/* The same, or -EINVAL naming the devices there are. */
int io_device_lookup(const struct io_device_set *set, const char *name,
		     const struct io_device **out, struct err *err);
/*
 * Bytes/s at which d's decode product reads weights of type (an io_type):
 * that type's rate if known, else product_bw, else the memory's (mem_bw;
 * 0 when that is unknown too). *source (may be NULL) says where it came
 * from.
 */
double io_device_product_rate(const struct io_device *d, uint32_t type,
			      enum io_bw_source *source);
/*
 * A given product rate (--devices product=, product.TYPE=) over measured
 * ones: given product=, it is every type's rate but those given their own.
 * d takes given's given rates; what given leaves unknown stays d's.
 */
void io_device_product_give(struct io_device *d, const struct io_device *given);
/* A capped GPU no probe has found yet (bandwidths unknown), or NULL. */
const struct io_device *io_device_set_unprobed(const struct io_device_set *set);
/* 0 if weights can be computed on d, -ENODEV (a GPU without backend). */
int io_device_usable(const struct io_device *d, struct err *err);
/* "cpu numa0 gpu0" into buf; returns its length. */
size_t io_device_set_names(const struct io_device_set *set, char *buf,
			   size_t cap);
const char *io_device_kind_name(enum io_device_kind kind);
const char *io_device_bw_source_name(enum io_bw_source s);

/* The machine's device names (with LLMFS_DEVICES), as io_device_set_names. */
size_t io_devices_list(char *buf, size_t cap);
/*
 * Bytes that can still be placed on device. -EINVAL (with the device list
 * in the message) for a device that does not exist.
 */
int io_device_free(const char *device, uint64_t *bytes, struct err *err);

/*
 * Move n tensors (indices into g->tensors) to device, all or none: the
 * bytes are copied into one new region on the device, then each
 * placement's data pointer is switched and the old memory is freed once no
 * tensor is resident in it. The caller guarantees that nothing reads the
 * tensors meanwhile. Tensors already on device stay. -EINVAL for an unknown
 * device or when the weights are replicated per node, -ENOSPC when the
 * device has no room; nothing moves then.
 */
int io_weights_move_many(struct io_weights *w, const uint64_t *idx, uint64_t n,
			 const char *device, struct err *err);
int io_weights_move(struct io_weights *w, uint64_t i, const char *device,
		    struct err *err);
/*
 * Tensor i's bytes leave io/'s memory for data, memory the caller owns
 * (a compute backend's buffer, or a host copy on its way to
 * io_weights_move_many), on device: its placement says so (layout 0:
 * the file's), and io/'s copy is freed once no tensor is resident in its
 * region. The caller frees data once the tensor has moved on (a later
 * detach, or a move, which copies from data) or the weights are freed.
 * Before a deferred load starts, nothing is copied: io_weights_start
 * reads the file's bytes into data. -EINVAL for no such tensor or
 * replicated weights.
 */
int io_weights_detach(struct io_weights *w, uint64_t i, void *data,
		      const char *device, struct err *err);
/*
 * io_weights_move_many with each tensor's bytes copied from src[k] (host
 * memory; NULL: from where it is), for tensors coming back from memory
 * the caller owned (io_weights_detach), which it frees afterwards.
 * Before a deferred load starts, src is not read: the tensors go back to
 * being read into io/'s memory, on the load's own device only (-EINVAL
 * for another).
 */
int io_weights_attach_many(struct io_weights *w, const uint64_t *idx,
			   uint64_t n, const char *device,
			   const void *const *src, struct err *err);
/* The device the load put the weights on ("cpu", "numaN"). */
const char *io_weights_home(const struct io_weights *w);
/* The devices of io_load_options.devices (or the machine's); owned by w. */
struct io_device_set *io_weights_devices(struct io_weights *w);

/*
 * Host memory of bytes bound to NUMA node before its first touch (mmap and
 * mbind MPOL_BIND; unbound where libnuma finds no NUMA), page aligned: a
 * buffer a plan puts on numaN (kv-in-ram's KV cache beside the GPU's
 * node). 0, -EINVAL (no such node), -ENOMEM; one message. The caller
 * frees it with io_node_free(p, bytes).
 */
int io_node_alloc(void **out, size_t bytes, int node, struct err *err);
void io_node_free(void *p, size_t bytes);
/* Pin the calling thread to the CPUs of NUMA node (no-op without NUMA). */
int io_numa_thread_pin(int node, struct err *err);
/* The NUMA node of a CPU (0 without NUMA). */
int io_numa_node_of_cpu(int cpu);
/* Online NUMA nodes (1 without NUMA). */
uint32_t io_numa_node_count(void);
/*
 * Parse a --numa= value: "interleave", "node:N", "replicate" or "default".
 * -EINVAL with a one-line message otherwise. Whether node N exists is
 * checked by the load.
 */
int io_numa_policy_parse(const char *s, enum io_numa_policy *policy, int *node,
			 struct err *err);

#endif
