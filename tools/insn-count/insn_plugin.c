// SPDX-License-Identifier: GPL-2.0
/*
 * insn_plugin.c - a QEMU TCG plugin that counts, exactly, the guest kernel
 * instructions executed per translation block, and writes the counts on
 * request (tools/insn-count/README.md).
 *
 * Every translated block whose first instruction lies in the kernel half
 * of the address space gets an inline 64-bit counter, bumped each time the
 * block runs; a block's instructions are its executions times its length
 * (a block left early by an interrupt or fault is counted whole: the
 * error is that of QEMU's own "hotblocks" plugin). User space is not
 * counted.
 *
 * Snapshots: a thread polls DIR/snap-req (DIR is the plugin argument
 * "dir=", the VM's shared output directory) every 50 ms. When it exists,
 * its first word names the snapshot: the counts so far are written to
 * DIR/snap-NAME.txt (one "vaddr ninsns count" line per block with a
 * count, hex vaddr) and snap-req is removed. The guest brackets a
 * measured run with two snapshots; their difference is the run.
 *
 * QEMU 7.2 ships no plugin header in Debian, so the few entry points used
 * are declared here, as QEMU's include/qemu/qemu-plugin.h (API version 1)
 * declares them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *udata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

struct block {
	uint64_t vaddr;
	uint64_t count;
	uint32_t ninsns;
};

#define CHUNK 65536
struct chunk {
	struct block b[CHUNK];
	size_t used;
	struct chunk *next;
};

static struct chunk *head, *cur;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char dir[4096];

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	struct block *b;

	(void)id;
	if (va < 0xffff800000000000ULL)
		return;
	pthread_mutex_lock(&lock);
	if (!cur || cur->used == CHUNK) {
		struct chunk *c = calloc(1, sizeof(*c));

		if (!c) {
			pthread_mutex_unlock(&lock);
			return;
		}
		if (cur)
			cur->next = c;
		else
			head = c;
		cur = c;
	}
	b = &cur->b[cur->used];
	b->vaddr = va;
	b->ninsns = (uint32_t)qemu_plugin_tb_n_insns(tb);
	/* Published before the block can run: the counter's address is set now. */
	__atomic_store_n(&cur->used, cur->used + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->count, 1);
}

static void dump(const char *name)
{
	char path[4200], tmp[4300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/snap-%s.txt", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	for (struct chunk *c = head; c; c = c->next) {
		size_t n = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);

		for (size_t i = 0; i < n; i++) {
			uint64_t k = __atomic_load_n(&c->b[i].count, __ATOMIC_RELAXED);

			if (k)
				fprintf(f, "%llx %u %llu\n", (unsigned long long)c->b[i].vaddr,
					c->b[i].ninsns, (unsigned long long)k);
		}
	}
	fclose(f);
	rename(tmp, path);
}

static void *poller(void *arg)
{
	char req[4200], name[256];

	(void)arg;
	snprintf(req, sizeof(req), "%s/snap-req", dir);
	for (;;) {
		FILE *f = fopen(req, "r");

		if (f) {
			name[0] = 0;
			if (fscanf(f, "%255s", name) == 1 && name[0] && !strchr(name, '/'))
				dump(name);
			fclose(f);
			unlink(req);
		}
		usleep(50000);
	}
	return NULL;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							       const qemu_info_t *info,
							       int argc, char **argv)
{
	pthread_t t;

	(void)info;
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "dir=", 4))
			snprintf(dir, sizeof(dir), "%s", argv[i] + 4);
	if (!dir[0]) {
		fprintf(stderr, "insn_plugin: needs dir=DIR\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	if (pthread_create(&t, NULL, poller, NULL))
		return -1;
	pthread_detach(t);
	return 0;
}
