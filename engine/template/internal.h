/* SPDX-License-Identifier: MIT */
/*
 * Inside the template engine: tokens, the syntax tree, values and the
 * interpreter's state. Only the files of engine/template/ include this.
 *
 * The language is @huggingface/jinja's (the interpreter node-llama-cpp
 * uses), not Python Jinja2's: the test renders llama.cpp's templates with
 * both and wants the same bytes, so its semantics are copied, quirks
 * included (JavaScript loose equality for ==, JavaScript number printing,
 * strip() that ignores its argument...). Documentation/generation.md
 * lists what is copied and what is not.
 *
 *   lexer.c     the source, preprocessed as Jinja's trim_blocks and
 *               lstrip_blocks, cut into tokens
 *   parser.c    tokens -> tree (struct tnode), in the parse arena: the
 *               expressions; parse_stmt.c the statements (parse.h)
 *   value.c     values: reference counted, every heap object of a render
 *               on one list so that the end of the render frees cycles too
 *   text.c      values -> text: JavaScript numbers, toString, tojson, and
 *               the JSON context -> values
 *   eval.c      expressions
 *   call.c      arguments, macros and calls
 *   exec.c      statements
 *   filters.c   filters and tests
 *   builtins.c  string and object methods, the global functions
 */
#ifndef LLMFS_ENGINE_TEMPLATE_INTERNAL_H
#define LLMFS_ENGINE_TEMPLATE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template.h"

/* ---- parse arena ------------------------------------------------------- */

struct tarena_chunk {
	struct tarena_chunk *next;
	size_t used, cap;
	max_align_t data[];
};

struct tarena {
	struct tarena_chunk *head;
};

void *tarena_alloc(struct tarena *a, size_t size);
void tarena_free(struct tarena *a);

/* ---- tokens ------------------------------------------------------------ */

enum ttok_type {
	TT_TEXT,
	TT_NUMBER,
	TT_STRING,
	TT_IDENT,
	TT_EQUALS,
	TT_LPAREN,
	TT_RPAREN,
	TT_OPEN_STMT,  /* {% */
	TT_CLOSE_STMT, /* %} */
	TT_OPEN_EXPR,  /* {{ */
	TT_CLOSE_EXPR, /* }} */
	TT_LBRACKET,
	TT_RBRACKET,
	TT_LBRACE,
	TT_RBRACE,
	TT_COMMA,
	TT_DOT,
	TT_COLON,
	TT_PIPE,
	TT_ADD,	    /* + - ~ */
	TT_MUL,	    /* * / // % */
	TT_POW,	    /* ** */
	TT_COMPARE, /* < > <= >= == != */
	TT_UNARY,   /* - + alone before an operand */
	TT_COMMENT,
};

struct ttok {
	enum ttok_type type;
	const char *s; /* the value, NUL-terminated, in the arena */
	size_t len;
	const char *at; /* where it is in the preprocessed source */
};

/* ---- the tree ---------------------------------------------------------- */

enum tnode_kind {
	TN_PROGRAM, /* list: body */
	TN_TEXT,    /* s: the text (a StringLiteral that is output) */
	TN_IF,	    /* a: test; list: body; list2: alternate */
	TN_FOR,	    /* a: loop variable(s); b: iterable; list; list2: else */
	TN_BREAK,
	TN_CONTINUE,
	TN_SET,		/* a: target; b: value or NULL; list: body */
	TN_MACRO,	/* s: name; list: body; list2: parameters */
	TN_CALL_STMT,	/* a: the call; list: body; list2: caller's params */
	TN_FILTER_STMT, /* a: identifier or call; list: body */
	TN_COMMENT,
	TN_IDENT,    /* s */
	TN_INT,	     /* num */
	TN_FLOAT,    /* num */
	TN_STRING,   /* s */
	TN_ARRAY,    /* list */
	TN_TUPLE,    /* list */
	TN_OBJECT,   /* list: key, value, key, value... */
	TN_MEMBER,   /* a: object; b: property; flag: computed ([]) */
	TN_CALL,     /* a: callee; list: arguments */
	TN_BINARY,   /* op; a, b */
	TN_UNARY,    /* op; a */
	TN_FILTER,   /* a: operand; b: identifier or call */
	TN_TEST,     /* a: operand; s: test name; flag: negated */
	TN_SELECT,   /* a: value; b: condition (value if condition) */
	TN_TERNARY,  /* a: condition; b: if true; c: if false */
	TN_SLICE,    /* a, b, c: start, stop, step, each may be NULL */
	TN_KWARG,    /* s: name; a: value */
	TN_SPREAD,   /* a: *expr */
	TN_KWSPREAD, /* a: **expr */
};

enum top {
	TOP_NONE,
	TOP_AND,
	TOP_OR,
	TOP_NOT,
	TOP_EQ,
	TOP_NE,
	TOP_LT,
	TOP_GT,
	TOP_LE,
	TOP_GE,
	TOP_IN,
	TOP_NOT_IN,
	TOP_ADD,
	TOP_SUB,
	TOP_CONCAT, /* ~ */
	TOP_MUL,
	TOP_DIV,
	TOP_FLOORDIV,
	TOP_MOD,
	TOP_POW,
};

struct tnode {
	uint8_t kind; /* enum tnode_kind */
	uint8_t op;   /* enum top */
	bool flag;
	const char *at; /* the source there, for messages */
	const char *s;
	size_t len;
	double num;
	struct tnode *a, *b, *c;
	struct tnode **list;
	size_t n;
	struct tnode **list2;
	size_t n2;
};

struct engine_template {
	struct tarena arena;
	struct tnode *program;
};

/* lexer.c: the tokens of src (in a's memory). -EINVAL and a message. */
int tlex(struct tarena *a, const char *src, size_t len, struct ttok **out,
	 size_t *n_out, struct err *err);
/* parser.c */
int tparse(struct tarena *a, const struct ttok *tok, size_t n,
	   struct tnode **out, struct err *err);

/* ---- values ------------------------------------------------------------ */

enum tv_type {
	TV_UNDEFINED,
	TV_NULL,
	TV_BOOL,
	TV_INT, /* a JavaScript number that the template treats as an integer */
	TV_FLOAT,
	TV_STRING,
	TV_ARRAY,
	TV_TUPLE, /* an array written (a, b) */
	TV_OBJECT,
	TV_KWARGS, /* an object of keyword arguments, last in a call */
	TV_NAMESPACE,
	TV_FUNCTION,
};

struct trt;
struct tenv;

/* Every heap object starts with this; refs counts struct tv holders. */
struct theap {
	uint32_t refs;
	uint8_t kind; /* enum theap_kind */
	size_t bytes; /* charged to the render */
	struct theap *prev, *next;
};

enum theap_kind { TH_STRING, TH_ARRAY, TH_OBJECT, TH_FUNCTION, TH_ENV };

struct tstr {
	struct theap h;
	size_t len;
	char p[]; /* len bytes and a NUL */
};

struct tv {
	uint8_t type; /* enum tv_type */
	union {
		bool b;
		double n;
		struct theap *h;
		struct tstr *s;
		struct tarr *a;
		struct tobj *o;
		struct tfn *f;
	};
};

struct tarr {
	struct theap h;
	size_t n, cap;
	struct tv *v;
};

struct tentry {
	struct tstr *key; /* a string heap object: one reference */
	struct tv val;
};

/* An ordered map (JavaScript's Map): insertion order, linear lookup. */
struct tobj {
	struct theap h;
	size_t n, cap;
	struct tentry *e;
};

/*
 * A builtin gets its bound value (the string of "s.upper()"), the
 * arguments (a trailing TV_KWARGS holds the keyword ones) and the caller's
 * environment; it returns a new reference in *out.
 */
typedef int (*tbuiltin_fn)(struct trt *r, const struct tv *self,
			   const struct tv *args, size_t n, struct tenv *env,
			   struct tv *out);

enum tfn_kind { TF_BUILTIN, TF_MACRO, TF_CALLER };

struct tfn {
	struct theap h;
	uint8_t kind; /* enum tfn_kind */
	tbuiltin_fn fn;
	struct tv self;		  /* TF_BUILTIN: bound value */
	const struct tnode *node; /* TF_MACRO, TF_CALLER */
	struct tenv *env;	  /* TF_CALLER: where the call block is */
	const char *name;	  /* for messages */
};

struct tenv {
	struct theap h;
	struct tenv *parent;
	struct tobj *vars;
};

struct trt {
	struct theap all; /* list head of every live heap object */
	size_t live_bytes, max_bytes;
	uint64_t steps, max_steps;
	unsigned depth;
	int64_t now; /* strftime_now's clock, Unix seconds */
	struct err *err;
};

/* Break and continue travel up as these (not errors). */
#define TR_BREAK 1
#define TR_CONTINUE 2

int trt_fail(struct trt *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline struct tv tv_undef(void)
{
	return (struct tv){ .type = TV_UNDEFINED };
}
static inline struct tv tv_null(void)
{
	return (struct tv){ .type = TV_NULL };
}
static inline struct tv tv_bool(bool b)
{
	return (struct tv){ .type = TV_BOOL, .b = b };
}
static inline struct tv tv_int(double n)
{
	return (struct tv){ .type = TV_INT, .n = n };
}
static inline struct tv tv_float(double n)
{
	return (struct tv){ .type = TV_FLOAT, .n = n };
}
static inline bool tv_is_heap(const struct tv *v)
{
	return v->type >= TV_STRING;
}
static inline bool tv_is_array(const struct tv *v)
{
	return v->type == TV_ARRAY || v->type == TV_TUPLE;
}
static inline bool tv_is_object(const struct tv *v)
{
	return v->type == TV_OBJECT || v->type == TV_KWARGS;
}
/* ObjectValue or NamespaceValue: attributes by name */
static inline bool tv_is_container(const struct tv *v)
{
	return tv_is_object(v) || v->type == TV_NAMESPACE;
}
static inline bool tv_is_number(const struct tv *v)
{
	return v->type == TV_INT || v->type == TV_FLOAT;
}

/* value.c */
void tv_ref(struct tv v);
void tv_drop(struct trt *r, struct tv v);
void trt_init(struct trt *r, struct err *err);
void trt_free_all(struct trt *r);
/* New objects with one reference; -ENOMEM (message set) on failure. */
int tv_str(struct trt *r, const char *p, size_t len, struct tv *out);
int tv_str0(struct trt *r, const char *p, struct tv *out);
int tv_arr(struct trt *r, uint8_t type, size_t cap, struct tv *out);
/* Takes over the reference of v. */
int tarr_push(struct trt *r, struct tarr *a, struct tv v);
int tv_obj(struct trt *r, uint8_t type, struct tv *out);
int tv_obj_cap(struct trt *r, uint8_t type, size_t cap, struct tv *out);
/* Sets key (a string value: one more reference) to v (taken over). */
int tobj_put(struct trt *r, struct tobj *o, struct tstr *key, struct tv v);
/* Sets key (copied) to v, whose reference it takes over. */
int tobj_set(struct trt *r, struct tobj *o, const char *key, size_t len,
	     struct tv v);
struct tv *tobj_get(const struct tobj *o, const char *key, size_t len);
bool tobj_del(struct trt *r, struct tobj *o, const char *key, size_t len);
int tv_builtin(struct trt *r, const char *name, tbuiltin_fn fn,
	       const struct tv *self, struct tv *out);
int tenv_new(struct trt *r, struct tenv *parent, struct tenv **out);
void tenv_drop(struct trt *r, struct tenv *e);
/* The variable (borrowed) or NULL. */
struct tv *tenv_lookup(struct tenv *e, const char *name, size_t len);
/* Takes over v's reference. */
int tenv_set(struct trt *r, struct tenv *e, const char *name, size_t len,
	     struct tv v);
/* JavaScript's truthiness of the value (__bool__). */
bool tv_truthy(const struct tv *v);
/* == as JavaScript's loose equality of the values; "in": strict. */
bool tv_loose_equal(struct trt *r, const struct tv *a, const struct tv *b);
bool tv_strict_equal(const struct tv *a, const struct tv *b);
const char *tv_type_name(const struct tv *v);

/* ---- text.c ------------------------------------------------------------ */

/* A growable byte buffer charged to the render. */
struct tbuf {
	char *p;
	size_t len, cap;
};

int tbuf_add(struct trt *r, struct tbuf *b, const char *p, size_t len);
int tbuf_addc(struct trt *r, struct tbuf *b, char c);
void tbuf_free(struct trt *r, struct tbuf *b);
/* A string value from the buffer (the buffer is emptied). */
int tbuf_take(struct trt *r, struct tbuf *b, struct tv *out);

/* Number.prototype.toString(). */
void tjs_number(double x, char *out, size_t cap);
/* RuntimeValue.toString(): what {{ v }} prints. */
int tv_print(struct trt *r, const struct tv *v, struct tbuf *b);
/* v.value.toString(): what ~ and + with a string use. */
int tv_js_string(struct trt *r, const struct tv *v, struct tbuf *b);

struct tjson_opts {
	int indent; /* 0: none */
	bool ensure_ascii;
	bool sort_keys;
	const char *item_sep, *key_sep; /* NULL: the defaults */
	bool undefined_null; /* undefined as null (tojson) or undefined */
};
int tv_to_json(struct trt *r, const struct tv *v, const struct tjson_opts *o,
	       int depth, struct tbuf *b);
/* The context as @huggingface/jinja's convertToRuntimeValues makes it. */
int tv_from_json(struct trt *r, const void *json, struct tv *out);

/* UTF-8 helpers shared by the builtins. */
size_t tjs_space_at(const char *p, const char *end); /* bytes, 0 if none */
/* JavaScript trim() on [*p, *p + *len). */
void tjs_trim(const char **p, size_t *len, bool start, bool end);
/* Length in UTF-16 code units, as JavaScript's .length. */
size_t tjs_length(const char *p, size_t len);
/* Decode one UTF-8 sequence; invalid bytes decode as themselves. */
uint32_t tutf8_decode(const char *p, const char *end, size_t *n);
size_t tutf8_encode(uint32_t c, char *out);

/* ---- eval.c, call.c, exec.c -------------------------------------------- */

/* calls and nested blocks in flight: far more than templates need */
#define TEVAL_MAX_DEPTH 400

/* Count one step of the render: -EINVAL past max_steps. */
int tstep(struct trt *r);
int teval(struct trt *r, const struct tnode *n, struct tenv *env,
	  struct tv *out);
int texec_block(struct trt *r, struct tnode *const *list, size_t n,
		struct tenv *env, struct tbuf *out);
/* Positional arguments then one TV_KWARGS if any keyword was given. */
int teval_args(struct trt *r, struct tnode *const *list, size_t n,
	       struct tenv *env, bool always_kwargs, struct tv **out,
	       size_t *n_out);
void tv_drop_all(struct trt *r, struct tv *v, size_t n);
int tcall(struct trt *r, const struct tv *fn, const struct tv *args, size_t n,
	  struct tenv *env, struct tv *out);
/* A call expression: its arguments, its callee, the call. */
int teval_call(struct trt *r, const struct tnode *nd, struct tenv *env,
	       struct tv *out);

/* ---- filters.c --------------------------------------------------------- */

int tfilter_apply(struct trt *r, struct tv operand, const struct tnode *filter,
		  struct tenv *env, struct tv *out);
/* -ENOENT (message set) for an unknown test */
int ttest_apply(struct trt *r, const char *name, const struct tv *a,
		const struct tv *b, bool *result);
/* compareRuntimeValues for sort and dictsort. */
int tv_compare(struct trt *r, const struct tv *a, const struct tv *b,
	       bool case_sensitive, int *result);

/* ---- builtins.c -------------------------------------------------------- */

/* A string's or object's method by name (borrowed self), or undefined. */
int tbuiltin_member(struct trt *r, const struct tv *self, const char *name,
		    size_t len, struct tv *out);
/* The globals of setupGlobals(), into the root environment. */
int tglobals_add(struct trt *r, struct tenv *root);
/* A keyword argument of a trailing TV_KWARGS, or NULL. */
const struct tv *targ_kw(const struct tv *args, size_t n, const char *name);
/* The positional arguments: n without a trailing TV_KWARGS. */
size_t targ_positional(const struct tv *args, size_t n);
int tstr_replace(struct trt *r, const struct tstr *s, const struct tstr *old,
		 const struct tstr *rep, double count, struct tv *out);
int tstr_case(struct trt *r, const struct tstr *s, bool upper, struct tv *out);
int tstr_title(struct trt *r, const struct tstr *s, struct tv *out);
int tstr_capitalize(struct trt *r, const struct tstr *s, struct tv *out);

#endif
