// SPDX-License-Identifier: MIT
/*
 * The store scanners (fs/store*.c) on stores written here: llama.cpp's
 * naming of model files (tags, split parts, what is not a model), layout
 * detection, and every way an Ollama manifest can be broken, each an
 * item with one reason while the other manifests still give models.
 * tests/fs/stores.sh mounts real layouts; this checks the corners.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../fs/internal.h"
#include "../../fs/store.h"
#include "../common/check_main.h"

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX], dir[PATH_MAX], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (slash = dir + strlen(root) + 1; (slash = strchr(slash, '/'));
	     slash++) {
		*slash = '\0';
		mkdir(dir, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/llmfs-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_store_gguf_names)
{
	static const char *const tags[][2] = {
		{ "Qwen3-0.6B-Q8_0.gguf", "Q8_0" },
		{ "sub/Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M" },
		{ "model-q4_k_m-00001-of-00003.gguf", "Q4_K_M" },
		{ "gemma.IQ4_XS.gguf", "IQ4_XS" },
		{ "stories260K.gguf", "stories260K" },
		{ "x-0.6B.gguf", "6B" }, /* as llama.cpp's regex reads it */
	};
	unsigned no, count;
	char tag[256];

	for (size_t i = 0; i < sizeof(tags) / sizeof(*tags); i++) {
		fs_store_gguf_tag(tags[i][0], tag, sizeof(tag));
		ck_assert_str_eq(tag, tags[i][1]);
	}
	fs_store_split("a-00002-of-00003.gguf", &no, &count);
	ck_assert_uint_eq(no, 2);
	ck_assert_uint_eq(count, 3);
	fs_store_split("a-2-of-3.gguf", &no, &count);
	ck_assert_uint_eq(count, 1);
	ck_assert(fs_store_gguf_is_model("a-Q4_K_M.gguf"));
	ck_assert(fs_store_gguf_is_model("a-00001-of-00002.gguf"));
	ck_assert(!fs_store_gguf_is_model("a-00002-of-00002.gguf"));
	ck_assert(!fs_store_gguf_is_model("mmproj-model-f16.gguf"));
	ck_assert(!fs_store_gguf_is_model("imatrix.gguf"));
	ck_assert(!fs_store_gguf_is_model(".hidden.gguf"));
	ck_assert(!fs_store_gguf_is_model("a.gguf.downloadInProgress"));
	ck_assert(!fs_store_gguf_is_model("readme.md"));
}
END_TEST

START_TEST(test_store_item_names)
{
	struct fs_store_item *it = fs_store_item_new(NULL, "hf.co/a/b:Q4_K_M");

	ck_assert_str_eq(it->name, "hf.co--a--b:Q4_K_M");
	ck_assert_str_eq(it->key, "hf.co/a/b:Q4_K_M");
	fs_store_item_free(it);
}
END_TEST

START_TEST(test_store_detect)
{
	char dir[PATH_MAX];

	ck_assert_int_eq(fs_store_detect(root), -1);
	put("ollama/manifests/.keep", "");
	put("ollama/blobs/.keep", "");
	snprintf(dir, sizeof(dir), "%s/ollama", root);
	ck_assert_int_eq(fs_store_detect(dir), FS_STORE_OLLAMA);
	put("hub/models--a--b/snapshots/.keep", "");
	snprintf(dir, sizeof(dir), "%s/hub", root);
	ck_assert_int_eq(fs_store_detect(dir), FS_STORE_HF);
	snprintf(dir, sizeof(dir), "%s/hub/models--a--b", root);
	ck_assert_int_eq(fs_store_detect(dir), FS_STORE_HF);
	put("lms/pub/repo/x-Q8_0.gguf", "");
	snprintf(dir, sizeof(dir), "%s/lms", root);
	ck_assert_int_eq(fs_store_detect(dir), FS_STORE_LMSTUDIO);
	put("lcpp/manifest=a=b=Q8_0.json", "{}");
	snprintf(dir, sizeof(dir), "%s/lcpp", root);
	ck_assert_int_eq(fs_store_detect(dir), FS_STORE_LLAMACPP);
	/* a directory of model files is a plain directory */
	put("plain/x.gguf", "");
	snprintf(dir, sizeof(dir), "%s/plain", root);
	ck_assert_int_eq(fs_store_detect(dir), -1);
}
END_TEST

#define DIGEST(c) "sha256:" c c c c c c c c c c c c c c c c
#define BLOB(c) "blobs/sha256-" c c c c c c c c c c c c c c c c

static const char *layer(const char *media, const char *digest, char *buf,
			 size_t cap)
{
	snprintf(buf, cap,
		 "{\"mediaType\":\"application/vnd.ollama.image.%s\","
		 "\"digest\":\"%s\",\"size\":1}",
		 media, digest);
	return buf;
}

static void manifest(const char *name, const char *layers)
{
	char rel[256], text[2048];

	snprintf(rel, sizeof(rel), "manifests/registry.ollama.ai/library/%s",
		 name);
	snprintf(text, sizeof(text), "{\"schemaVersion\":2,\"layers\":[%s]}",
		 layers);
	put(rel, text);
}

static const struct fs_store_item *find(const struct fs_store_list *l,
					const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i]->name, name))
			return l->v[i];
	return NULL;
}

START_TEST(test_store_ollama_manifests)
{
	char a[256], b[256], c[256], both[800];
	struct fs_store_list l = { 0 };
	const struct fs_store_item *it;

	put(BLOB("1111"), "GGUF");
	put(BLOB("2222"), "{\"temperature\":0.5,\"stop\":\"END\",\"num_ctx\":"
			  "512,\"seed\":-1,\"num_predict\":-1,\"num_gpu\":9}");
	put(BLOB("3333"), "Be brief.\nVery.");
	put(BLOB("4444"), "[1,2]");
	layer("model", DIGEST("1111"), a, sizeof(a));
	layer("params", DIGEST("2222"), b, sizeof(b));
	layer("system", DIGEST("3333"), c, sizeof(c));
	snprintf(both, sizeof(both), "%s,%s,%s", a, b, c);
	manifest("good/1b", both);
	put("manifests/registry.ollama.ai/library/bad/json", "{\"layers\":[");
	manifest("bad/digest", layer("model", "sha256:xyz", a, sizeof(a)));
	manifest("bad/noblob", layer("model", DIGEST("9999"), a, sizeof(a)));
	layer("params", DIGEST("4444"), b, sizeof(b));
	layer("model", DIGEST("1111"), a, sizeof(a));
	snprintf(both, sizeof(both), "%s,%s", a, b);
	manifest("bad/params", both);
	put("manifests/registry.ollama.ai/library/bad/version",
	    "{\"schemaVersion\":3,\"layers\":[]}");
	/* Docker's schema 1: fsLayers, no layers */
	put("manifests/registry.ollama.ai/library/bad/v1",
	    "{\"schemaVersion\":1,\"name\":\"library/bad\",\"tag\":\"v1\","
	    "\"fsLayers\":[{\"blobSum\":\"" DIGEST("1111") "\"}]}");
	/* a cloud model: no GGUF layer, no model here, no error either */
	manifest("cloud/x", layer("license", DIGEST("3333"), a, sizeof(a)));
	put("manifests/registry.ollama.ai/other/m/t", "{\"layers\":[]}");
	ck_assert_int_eq(fs_store_ollama.scan(NULL, root, &l), 0);
	ck_assert_uint_eq(l.n, 7); /* good, 6 bad; cloud and other: none */
	it = find(&l, "good:1b");
	ck_assert_ptr_nonnull(it);
	ck_assert_ptr_null(it->error);
	ck_assert_str_eq(it->key, "registry.ollama.ai/library/good:1b");
	ck_assert_ptr_nonnull(strstr(it->path, BLOB("1111")));
	ck_assert_str_eq(it->config,
			 "temperature=0.5\nstop=END\n"
			 "max_tokens=0\nsystem=Be brief.\\nVery.\n");
	ck_assert_str_eq(it->params,
			 "temperature=0.5 stop=END num_ctx=512 num_predict=0");
	ck_assert_str_eq(it->ignored, "seed num_gpu");
	ck_assert_uint_eq(it->n_ctx, 512);
	ck_assert_ptr_nonnull(strstr(find(&l, "bad:json")->error, "not JSON"));
	ck_assert_ptr_nonnull(strstr(find(&l, "bad:digest")->error,
				     "bad digest 'sha256:xyz'"));
	ck_assert_ptr_nonnull(strstr(find(&l, "bad:noblob")->error,
				     "the model layer of "
				     "registry.ollama.ai/library/bad:noblob "
				     "is missing"));
	ck_assert_ptr_nonnull(strstr(find(&l, "bad:params")->error,
				     "params layer of "
				     "registry.ollama.ai/library/bad:params: "
				     "not a JSON object"));
	ck_assert_ptr_nonnull(
		strstr(find(&l, "bad:version")->error, "schemaVersion 2"));
	ck_assert_ptr_nonnull(it = find(&l, "bad:v1"));
	ck_assert_ptr_nonnull(it->error);
	ck_assert_ptr_nonnull(strstr(it->error, "schemaVersion 2"));
	fs_store_list_free(&l);
}
END_TEST

/* The hub cache: refs/main's snapshot only; a later ref when no main. */
START_TEST(test_store_hf_refs)
{
	struct fs_store_list l = { 0 };
	const char *rev_a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	const char *rev_b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
	char rel[256];

	snprintf(rel, sizeof(rel), "models--o--r/snapshots/%s/x-Q8_0.gguf",
		 rev_a);
	put(rel, "GGUF");
	snprintf(rel, sizeof(rel), "models--o--r/snapshots/%s/x-Q4_0.gguf",
		 rev_b);
	put(rel, "GGUF");
	put("models--o--r/refs/main", rev_b);
	ck_assert_int_eq(fs_store_hf.scan(NULL, root, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0]->name, "o--r:Q4_0");
	fs_store_list_free(&l);
	/* no main: another ref, as llama.cpp's get_cached_ref */
	snprintf(rel, sizeof(rel), "%s/models--o--r/refs/main", root);
	unlink(rel);
	put("models--o--r/refs/pr-1", rev_a);
	ck_assert_int_eq(fs_store_hf.scan(NULL, root, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.v[0]->name, "o--r:Q8_0");
	fs_store_list_free(&l);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("store");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_store_gguf_names);
	tcase_add_test(tc, test_store_item_names);
	tcase_add_test(tc, test_store_detect);
	tcase_add_test(tc, test_store_ollama_manifests);
	tcase_add_test(tc, test_store_hf_refs);
	suite_add_tcase(s, tc);
	return s;
}

const struct check_main check_main = {
	.suite = store_suite,
};
