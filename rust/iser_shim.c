// SPDX-License-Identifier: GPL-2.0
/*
 * iser-rs C shim: module parameters and wrappers over static inline
 * functions and macros that bindgen cannot expose, plus the libiscsi
 * bookkeeping a transport must do itself (the failure report from inside
 * xmit_task and the unsolicited Data-Out accounting, kernel-doc at each).
 */
#include <linux/debugfs.h>
#include <linux/fault-inject.h>
#include <linux/ktime.h>
#include <linux/timekeeping.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/namei.h>
#include <linux/path.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/bottom_half.h>
#include <linux/delay.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/workqueue.h>
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <linux/highmem.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <scsi/scsi_cmnd.h>
#include <scsi/scsi_host.h>
#include <scsi/libiscsi.h>
#include <scsi/scsi_transport_iscsi.h>
#include "iser_shim.h"

/* Same names, meanings and defaults as ib_iser's parameters. */
unsigned int iser_rs_max_sectors = 1024;
module_param_named(max_sectors, iser_rs_max_sectors, uint, 0444);
MODULE_PARM_DESC(max_sectors, "Maximum number of 512-byte sectors per command (default: 1024)");

unsigned int iser_rs_max_lun = 512;
module_param_named(max_lun, iser_rs_max_lun, uint, 0444);
MODULE_PARM_DESC(max_lun, "Maximum LUN to scan (default: 512)");

int iser_rs_debug_level;
module_param_named(debug_level, iser_rs_debug_level, int, 0644);
MODULE_PARM_DESC(debug_level, "Enable debug tracing if > 0 (default: disabled)");

/*
 * iser-rs's own data-path choices, read when a connection is set up; off
 * switches exist to measure what each buys (make bench, README).
 */
bool iser_rs_inline_sends = true;
module_param_named(inline_sends, iser_rs_inline_sends, bool, 0644);
MODULE_PARM_DESC(inline_sends, "Send header-only command PDUs inline when the device allows (default: Y)");

unsigned int iser_rs_signal_every = 16;
module_param_named(signal_every, iser_rs_signal_every, uint, 0644);
MODULE_PARM_DESC(signal_every, "Request a completion for one Send in this many, 1..16 (default: 16; ib_iser: 1)");

/*
 * Send-queue entries per connection: 0 (the default) asks for MAX_SEND_WR
 * (limits.rs); the device's max_qp_wr caps it either way. A smaller queue
 * only makes commands wait for room (TARGET_BUSY) sooner. Read at setup.
 */
unsigned int iser_rs_sq_depth;
module_param_named(sq_depth, iser_rs_sq_depth, uint, 0644);
MODULE_PARM_DESC(sq_depth, "Send queue entries per connection, 0 = the full budget (default: 0; the device's max_qp_wr caps it)");

/*
 * iSER Hello (iSER §5.1.3, §9.3-9.4): off by default, since LIO and tgt
 * do not answer it (Linux peers exchange the CM private data instead).
 * Read when a connection is established.
 */
bool iser_rs_hello;
module_param_named(hello, iser_rs_hello, bool, 0644);
MODULE_PARM_DESC(hello, "Send an iSER Hello when connected and check the target's HelloReply before login (default: N; LIO and tgt do not answer it)");

/*
 * Fault injection for the guest suite (cases 049 and 045): each send_pdu
 * call (a Login, Text or Logout request from iscsid/iscsiadm) sleeps this
 * long after the request was posted and before the call returns, so the
 * response arrives before the call's netlink reply, as it does when
 * iscsiadm is preempted there. 0 (the default): off.
 */
unsigned int iser_rs_inject_send_pdu_delay_ms;
module_param_named(inject_send_pdu_delay_ms, iser_rs_inject_send_pdu_delay_ms, uint, 0644);
MODULE_PARM_DESC(inject_send_pdu_delay_ms, "Test only: delay the return of each send_pdu call (Login, Text, Logout, ... requests from iscsid/iscsiadm) by this many ms (default: 0)");

/*
 * Fault injection for the guest suite (case 069): each send_pdu call
 * busy-waits this long after the transport's end hook and before the call
 * returns (and scsi_transport_iscsi queues its netlink reply), without
 * sleeping, as a caller does whose CPU is taken away there (a vCPU the
 * host does not run, or a preempted task). 0 (the default): off.
 */
unsigned int iser_rs_inject_send_pdu_busy_ms;
module_param_named(inject_send_pdu_busy_ms, iser_rs_inject_send_pdu_busy_ms, uint, 0644);
MODULE_PARM_DESC(inject_send_pdu_busy_ms, "Test only: busy-wait (no sleep) this many ms at the end of each send_pdu call, before its netlink reply (default: 0)");

/*
 * Fault injection for the guest suite (case 053): a connection's setup
 * (the ROUTE_RESOLVED handler, which builds its PD, CQ, MRs, buffers and
 * QP) sleeps this long first, so that iscsid's login timeout, and its
 * ep_disconnect of that connection, fall inside the setup, as they do when
 * many connections queue on rdma_cm's one workqueue. 0 (the default): off.
 */
unsigned int iser_rs_inject_setup_delay_ms;
module_param_named(inject_setup_delay_ms, iser_rs_inject_setup_delay_ms, uint, 0644);
MODULE_PARM_DESC(inject_setup_delay_ms, "Test only: delay each connection's setup by this many ms (default: 0)");

/*
 * Fault injection for the guest suite (case 057): ep_disconnect sleeps
 * this long after it unpublished the libiscsi connection and before it
 * takes the teardown mutex, so that a device removal's DEVICE_REMOVAL
 * handler, which needs the same mutex, runs first, as it does when the
 * two race. 0 (the default): off.
 */
unsigned int iser_rs_inject_disconnect_delay_ms;
module_param_named(inject_disconnect_delay_ms, iser_rs_inject_disconnect_delay_ms, uint, 0644);
MODULE_PARM_DESC(inject_disconnect_delay_ms, "Test only: delay each ep_disconnect's teardown by this many ms (default: 0)");

/*
 * Fault injection for the guest suite (case 045): the receive path holds
 * each Logout Response this long and hands it on from process context
 * (login_rsp_work), so the target's disconnect that follows the response
 * is handled first, as it is when rdma_cm's event work runs before the
 * CQ's softirq handled the receive. 0 (the default): off.
 */
unsigned int iser_rs_inject_logout_rsp_delay_ms;
module_param_named(inject_logout_rsp_delay_ms, iser_rs_inject_logout_rsp_delay_ms, uint, 0644);
MODULE_PARM_DESC(inject_logout_rsp_delay_ms, "Test only: hold each received Logout Response this many ms before handling it (default: 0)");

/*
 * Fault injection for the guest suite (case 071): each SCSI command's
 * transmit call busy-waits this long (no sleep; libiscsi holds the
 * session's frwd_lock, bottom halves off) before the command is marked in
 * transmission (`inject_xmit_stall_ms`) or after it was marked and before
 * its post (`inject_xmit_posting_stall_ms`), so that a target answering
 * the command before it was sent is heard inside that window. 0 (the
 * default): off.
 */
unsigned int iser_rs_inject_xmit_stall_ms;
module_param_named(inject_xmit_stall_ms, iser_rs_inject_xmit_stall_ms, uint, 0644);
MODULE_PARM_DESC(inject_xmit_stall_ms, "Test only: busy-wait this many ms in each SCSI command's xmit before the command is marked in transmission (default: 0)");
unsigned int iser_rs_inject_xmit_posting_stall_ms;
module_param_named(inject_xmit_posting_stall_ms, iser_rs_inject_xmit_posting_stall_ms, uint, 0644);
MODULE_PARM_DESC(inject_xmit_posting_stall_ms, "Test only: busy-wait this many ms in each SCSI command's xmit after it was marked in transmission, before its post (default: 0)");
/*
 * Test only (case 071, round bound): how long the receive path waits for
 * a command's post before it treats the command as not on the wire, in
 * ms, in place of the built-in 5000 (XMIT_WAIT_MS). 0 (the default): the
 * built-in bound.
 */
unsigned int iser_rs_inject_xmit_wait_ms;
module_param_named(inject_xmit_wait_ms, iser_rs_inject_xmit_wait_ms, uint, 0644);
MODULE_PARM_DESC(inject_xmit_wait_ms, "Test only: how long a response waits for its command's post, in place of 5000 ms (default: 0, the built-in bound)");
/*
 * Test only (case 071): how the last stall of a transmit call ended, for
 * the case's log: its length in ms, and whether the receive path met the
 * early response during it (the stall then ended at once). Writable, so
 * that the case clears them before each round.
 */
static unsigned int iser_rs_xmit_stall_last_ms;
module_param_named(xmit_stall_last_ms, iser_rs_xmit_stall_last_ms, uint, 0644);
MODULE_PARM_DESC(xmit_stall_last_ms, "Test only: how long the last injected xmit stall lasted, in ms");
static bool iser_rs_xmit_stall_last_met;
module_param_named(xmit_stall_last_met, iser_rs_xmit_stall_last_met, bool, 0644);
MODULE_PARM_DESC(xmit_stall_last_met, "Test only: whether the last injected xmit stall ended because the receive path met the early response");

/*
 * Test only: a connection's QP is created asking the device for at most
 * this many SGEs per send work request, while the driver builds its Sends
 * as usual, so the device itself refuses a Send with more (rxe: EINVAL,
 * naming that work request): a command chain fails at its Send after its
 * REG_MR was posted, through the direct post path (case 054). Read at QP
 * creation. 0 (the default): off.
 */
unsigned int iser_rs_inject_qp_send_sge;
module_param_named(inject_qp_send_sge, iser_rs_inject_qp_send_sge, uint, 0644);
MODULE_PARM_DESC(inject_qp_send_sge, "Test only: create QPs with at most this many send SGEs, so the device refuses larger Sends (default: 0, off)");

/*
 * Fault injection for the guest suite (case 056): a device that takes
 * fewer SGEs per work request than this is made to look as if it took
 * only this many (receive and send alike), so a connection's setup meets
 * the refusal of a device too small for the page-backed buffers, which
 * rxe (32) and siw (6) never reach. 0 (the default): off.
 */
static unsigned int iser_rs_inject_dev_max_sge;
module_param_named(inject_dev_max_sge, iser_rs_inject_dev_max_sge, uint, 0644);
MODULE_PARM_DESC(inject_dev_max_sge, "Test only: report at most this many SGEs per work request for every device (default: 0, off)");

/*
 * Fault injection for the guest suite (case 056): the Nth page mapping of
 * a receive or login buffer area from now fails, once (the count then
 * reads 0), as a mapping error would: nothing is mapped for that page.
 * ib_dma_mapping_error() never reports one for rxe or siw (virtual DMA),
 * so only this reaches that path here. 0 (the default): off.
 */
static unsigned int iser_rs_inject_dma_map_fail_in;
module_param_named(inject_dma_map_fail_in, iser_rs_inject_dma_map_fail_in, uint, 0644);
MODULE_PARM_DESC(inject_dma_map_fail_in, "Test only: fail the Nth buffer page mapping from now, once (default: 0, off)");

/*
 * Live connections, QPs, MRs, PDs and CQs: back to 0 after logout (leak
 * check); [5] counts connections established since load (only grows);
 * [6] DMA-mapped pages of receive and login buffer areas.
 */
static atomic_t iser_rs_live[7];

/**
 * iser_rs_live_get() - show a live-object counter (module parameter get)
 * @buf: sysfs output buffer
 * @kp: the parameter; its arg is the counter
 *
 * Return: bytes written.
 */
static int iser_rs_live_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read((atomic_t *)kp->arg));
}

static const struct kernel_param_ops iser_rs_live_ops = {
	.get = iser_rs_live_get,
};
module_param_cb(live_conns, &iser_rs_live_ops, &iser_rs_live[0], 0444);
MODULE_PARM_DESC(live_conns, "Live iSER connections (read-only)");
module_param_cb(live_qps, &iser_rs_live_ops, &iser_rs_live[1], 0444);
MODULE_PARM_DESC(live_qps, "Live queue pairs (read-only)");
module_param_cb(live_mrs, &iser_rs_live_ops, &iser_rs_live[2], 0444);
MODULE_PARM_DESC(live_mrs, "Live fast-registration MRs (read-only)");
module_param_cb(live_pds, &iser_rs_live_ops, &iser_rs_live[3], 0444);
MODULE_PARM_DESC(live_pds, "Live protection domains, one per connection (read-only)");
module_param_cb(live_cqs, &iser_rs_live_ops, &iser_rs_live[4], 0444);
MODULE_PARM_DESC(live_cqs, "Live completion queues taken from the CQ pool (read-only)");
module_param_cb(connects, &iser_rs_live_ops, &iser_rs_live[5], 0444);
MODULE_PARM_DESC(connects, "RDMA connections established since the module was loaded (read-only)");
module_param_cb(live_dma_pages, &iser_rs_live_ops, &iser_rs_live[6], 0444);
MODULE_PARM_DESC(live_dma_pages, "Live DMA-mapped pages of receive and login buffers (read-only)");

/* BH-disabling spinlocks for rust/sys/bhlock.rs; one lockdep class. */
/**
 * iser_rs_bh_lock_new() - allocate and initialise a BH spinlock
 *
 * Return: the lock, or NULL without memory. Process context.
 */
spinlock_t *iser_rs_bh_lock_new(void)
{
	spinlock_t *lock = kmalloc(sizeof(*lock), GFP_KERNEL);

	if (lock)
		spin_lock_init(lock);
	return lock;
}

/**
 * iser_rs_bh_lock_free() - free a lock from iser_rs_bh_lock_new()
 * @lock: the lock, not held
 */
void iser_rs_bh_lock_free(spinlock_t *lock)
{
	kfree(lock);
}

/**
 * iser_rs_spin_lock_bh() - spin_lock_bh() for Rust
 * @lock: a lock from iser_rs_bh_lock_new()
 */
void iser_rs_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

/**
 * iser_rs_spin_unlock_bh() - spin_unlock_bh() for Rust
 * @lock: the lock the caller holds
 */
void iser_rs_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

/**
 * iser_rs_rcu_read_lock() - rcu_read_lock() for Rust
 */
void iser_rs_rcu_read_lock(void)
{
	rcu_read_lock();
}

/**
 * iser_rs_rcu_read_unlock() - rcu_read_unlock() for Rust
 */
void iser_rs_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

/**
 * iser_rs_assert_bh_off() - warn once unless bottom halves are off here
 *
 * The Rust side calls it on kernels with lockdep (CONFIG_PROVE_LOCKING,
 * the debug kernel) wherever it makes a token saying that bottom halves
 * are disabled (softirq, or under a spin_lock_bh lock): the token stands
 * in for an RCU read-side section there.
 */
void iser_rs_assert_bh_off(void)
{
	WARN_ON_ONCE(!in_softirq());
}

/**
 * iser_rs_synchronize_rcu() - synchronize_rcu() for Rust (process context)
 */
void iser_rs_synchronize_rcu(void)
{
	synchronize_rcu();
}

/**
 * iser_rs_noio_save() - enter a NOIO allocation scope
 *
 * Every allocation of the calling task until the matching
 * iser_rs_noio_restore() behaves as GFP_NOIO: reclaim never starts I/O,
 * which may have to go through the very connection being set up (swap or
 * the root file system on an iSER disk). The 6.12 kernel crate has no
 * GFP_NOIO; the scope covers allocations made by C callees too.
 *
 * Return: the flags to hand to iser_rs_noio_restore().
 */
unsigned int iser_rs_noio_save(void)
{
	return memalloc_noio_save();
}

/**
 * iser_rs_noio_restore() - leave a NOIO allocation scope
 * @flags: what the matching iser_rs_noio_save() returned
 */
void iser_rs_noio_restore(unsigned int flags)
{
	memalloc_noio_restore(flags);
}

/**
 * iser_rs_live_add() - add to a live-object counter
 * @which: index into iser_rs_live (out of range: ignored)
 * @delta: amount to add
 */
void iser_rs_live_add(int which, int delta)
{
	if (which >= 0 && which < ARRAY_SIZE(iser_rs_live))
		atomic_add(delta, &iser_rs_live[which]);
}

/**
 * iser_rs_transport_name_taken() - whether an iSCSI transport of that name is registered
 * @name: the transport name ("iser")
 *
 * Return: true if another module (ib_iser) registered it.
 */
bool iser_rs_transport_name_taken(const char *name)
{
	/*
	 * scsi_transport_iscsi keeps its transport list private and would
	 * register a second "iser" device under the same name with a sysfs
	 * duplicate-name splat; its sysfs class directory is the public view.
	 */
	char p[96];
	struct path path;

	snprintf(p, sizeof(p), "/sys/class/iscsi_transport/%s", name);
	if (kern_path(p, LOOKUP_FOLLOW, &path))
		return false;
	path_put(&path);
	return true;
}

/**
 * iser_rs_dir() - DMA direction of a to-device flag
 * @to_device: non-zero: the device reads the memory
 *
 * Return: DMA_TO_DEVICE or DMA_FROM_DEVICE.
 */
static enum dma_data_direction iser_rs_dir(int to_device)
{
	return to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
}

#ifdef CONFIG_FAULT_INJECTION_DEBUG_FS
/*
 * Test only: failed posts on demand, through the kernel's fault-injection
 * framework (Documentation/fault-injection/fault-injection.rst). The
 * attribute sits in debugfs as fail_iser_rs_post/ with the usual knobs
 * (probability, interval, times, verbose, task-filter, and the stack-trace
 * filter); it starts disabled (probability 0). A post it fails returns
 * -ENOMEM, what a full queue answers, and posts nothing of its chain. With
 * fail_iser_rs_post/partial non-zero only send chains of n > 1 work
 * requests fail, each after posting a random prefix of 1 to n - 1 of them,
 * as a real ib_post_send() does when a work request past the head is
 * refused.
 */
static DECLARE_FAULT_ATTR(iser_rs_fail_post);
static struct dentry *iser_rs_fail_post_dir;
static u32 iser_rs_fail_post_partial;

/*
 * The attribute's probability, which the Rust posts read (READ_ONCE) before
 * they call the provider directly: non-zero sends them through
 * iser_rs_post_send()/iser_rs_post_recv(), where injection happens.
 */
const unsigned long *const iser_rs_fail_post_armed = &iser_rs_fail_post.probability;

/**
 * iser_rs_fault_init() - create debugfs fail_iser_rs_post/
 *
 * Called once from module init. A failure to create it leaves injection
 * off, nothing else.
 */
void iser_rs_fault_init(void)
{
	struct dentry *d;

	d = fault_create_debugfs_attr("fail_iser_rs_post", NULL, &iser_rs_fail_post);
	iser_rs_fail_post_dir = IS_ERR(d) ? NULL : d;
	if (iser_rs_fail_post_dir)
		debugfs_create_u32("partial", 0600, iser_rs_fail_post_dir,
				   &iser_rs_fail_post_partial);
}

/**
 * iser_rs_fault_exit() - remove debugfs fail_iser_rs_post/ (module exit)
 */
void iser_rs_fault_exit(void)
{
	debugfs_remove_recursive(iser_rs_fail_post_dir);
	iser_rs_fail_post_dir = NULL;
}

/*
 * Whether this post fails: @send is the send chain, NULL for a receive.
 * With "partial" set only send chains of two or more work requests fail.
 * Inlined into both posts: a kernel built for size would otherwise call
 * it on every post.
 */
static __always_inline bool iser_rs_post_fails(const struct ib_send_wr *send)
{
	/* Off (probability 0) is the rule: no call on the data path then. */
	if (likely(!READ_ONCE(iser_rs_fail_post.probability)))
		return false;
	if (READ_ONCE(iser_rs_fail_post_partial) && (!send || !send->next))
		return false;
	return should_fail(&iser_rs_fail_post, 1);
}

/*
 * An injected failure of the send chain @wr of at least two work requests
 * ("partial" set): posts a random prefix of it, one work request at a time
 * (a copy with no successor: the chain is the caller's). Returns how many
 * were posted.
 */
static u32 iser_rs_fail_post_prefix(struct ib_qp *qp, const struct ib_send_wr *wr)
{
	const struct ib_send_wr *w;
	u32 n = 0, k, i;

	if (!READ_ONCE(iser_rs_fail_post_partial))
		return 0;
	for (w = wr; w; w = w->next)
		n++;
	if (n < 2)
		return 0;
	k = 1 + get_random_u32_below(n - 1);
	for (i = 0, w = wr; i < k; i++, w = w->next) {
		union {
			struct ib_send_wr send;
			struct ib_reg_wr reg;
		} one;

		if (w->opcode == IB_WR_REG_MR)
			one.reg = *reg_wr(w);
		else if (w->opcode == IB_WR_SEND || w->opcode == IB_WR_LOCAL_INV)
			one.send = *w;
		else
			break;
		/* ib_reg_wr begins with its ib_send_wr: one.send is one.reg.wr. */
		one.send.next = NULL;
		if (ib_post_send(qp, &one.send, NULL))
			break;
	}
	return i;
}
#else
void iser_rs_fault_init(void)
{
}

void iser_rs_fault_exit(void)
{
}

static __always_inline bool iser_rs_post_fails(const struct ib_send_wr *send)
{
	return false;
}

/* Without the framework injection is never armed. */
static const unsigned long iser_rs_fail_post_off;
const unsigned long *const iser_rs_fail_post_armed = &iser_rs_fail_post_off;

static u32 iser_rs_fail_post_prefix(struct ib_qp *qp, const struct ib_send_wr *wr)
{
	return 0;
}
#endif

/**
 * iser_rs_post_send() - ib_post_send() for Rust, when injection is armed
 * @qp: the QP
 * @wr: the chain of work requests
 * @posted: on failure, how many work requests of the chain, from its head,
 *	were posted before the one refused (the device runs them)
 *
 * Return: 0 or a negative errno (nothing of the chain from the bad WR on
 * is posted; an injected failure, see iser_rs_fault_init(), posts none of
 * it, or a prefix with "partial" set).
 */
int iser_rs_post_send(struct ib_qp *qp, const struct ib_send_wr *wr, u32 *posted)
{
	/* A provider that fails without naming the bad WR posted nothing. */
	const struct ib_send_wr *bad = wr, *w;
	u32 n = 0;
	int ret;

	if (iser_rs_post_fails(wr)) {
		*posted = iser_rs_fail_post_prefix(qp, wr);
		return -ENOMEM;
	}
	ret = ib_post_send(qp, wr, &bad);
	if (ret) {
		for (w = wr; w && w != bad; w = w->next)
			n++;
		/* The whole chain cannot have been posted if it failed. */
		*posted = w ? n : 0;
	}
	return ret;
}

/**
 * iser_rs_post_recv() - ib_post_recv() for Rust, when injection is armed
 * @qp: the QP
 * @wr: the chain of receive work requests
 *
 * Return: 0 or a negative errno.
 */
int iser_rs_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr)
{
	if (iser_rs_post_fails(NULL))
		return -ENOMEM;
	return ib_post_recv(qp, wr, NULL);
}

/**
 * iser_rs_dma_map_single() - ib_dma_map_single()
 * @dev: the RDMA device
 * @addr: kernel virtual address
 * @len: bytes
 * @to_device: non-zero: DMA_TO_DEVICE, else DMA_FROM_DEVICE
 *
 * Return: the DMA address; check it with iser_rs_dma_mapping_error().
 */
u64 iser_rs_dma_map_single(struct ib_device *dev, void *addr, size_t len, int to_device)
{
	return ib_dma_map_single(dev, addr, len, iser_rs_dir(to_device));
}

/**
 * iser_rs_dma_unmap_single() - ib_dma_unmap_single()
 * @dev: the RDMA device
 * @addr: DMA address from iser_rs_dma_map_single()
 * @len: bytes mapped
 * @to_device: direction as mapped
 */
void iser_rs_dma_unmap_single(struct ib_device *dev, u64 addr, size_t len, int to_device)
{
	ib_dma_unmap_single(dev, addr, len, iser_rs_dir(to_device));
}

/**
 * iser_rs_dma_mapping_error() - ib_dma_mapping_error()
 * @dev: the RDMA device
 * @addr: a DMA address
 *
 * Return: non-zero if the mapping failed.
 */
int iser_rs_dma_mapping_error(struct ib_device *dev, u64 addr)
{
	return ib_dma_mapping_error(dev, addr);
}

/**
 * iser_rs_dma_sync_for_cpu() - ib_dma_sync_single_for_cpu()
 * @dev: the RDMA device
 * @addr: DMA address
 * @len: bytes
 * @to_device: direction as mapped
 */
void iser_rs_dma_sync_for_cpu(struct ib_device *dev, u64 addr, size_t len, int to_device)
{
	ib_dma_sync_single_for_cpu(dev, addr, len, iser_rs_dir(to_device));
}

/**
 * iser_rs_dma_sync_for_device() - ib_dma_sync_single_for_device()
 * @dev: the RDMA device
 * @addr: DMA address
 * @len: bytes
 * @to_device: direction as mapped
 */
void iser_rs_dma_sync_for_device(struct ib_device *dev, u64 addr, size_t len, int to_device)
{
	ib_dma_sync_single_for_device(dev, addr, len, iser_rs_dir(to_device));
}

/*
 * Whether the injected mapping failure (inject_dma_map_fail_in) is this
 * one: counts the parameter down, and answers true for the mapping that
 * takes it from 1 to 0 (concurrent mappings each take one step).
 */
static bool iser_rs_dma_map_injected(void)
{
	unsigned int n = READ_ONCE(iser_rs_inject_dma_map_fail_in);

	do {
		if (likely(!n))
			return false;
	} while (!try_cmpxchg(&iser_rs_inject_dma_map_fail_in, &n, n - 1));
	return n == 1;
}

/**
 * iser_rs_dma_map_vmalloc_page() - ib_dma_map_page() of one vmalloc page
 * @dev: the RDMA device
 * @addr: a page-aligned address inside a vmalloc area
 * @to_device: non-zero: DMA_TO_DEVICE, else DMA_FROM_DEVICE
 * @dma: out: the DMA address of the whole page, on success
 *
 * Counted in live_dma_pages until iser_rs_dma_unmap_page().
 *
 * Return: 0, or -ENOMEM if the mapping failed (nothing is mapped then).
 */
int iser_rs_dma_map_vmalloc_page(struct ib_device *dev, void *addr, int to_device, u64 *dma)
{
	u64 a;

	if (iser_rs_dma_map_injected())
		return -ENOMEM;
	a = ib_dma_map_page(dev, vmalloc_to_page(addr), 0, PAGE_SIZE, iser_rs_dir(to_device));
	if (ib_dma_mapping_error(dev, a))
		return -ENOMEM;
	atomic_inc(&iser_rs_live[6]);
	*dma = a;
	return 0;
}

/**
 * iser_rs_dma_unmap_page() - ib_dma_unmap_page() of a whole page
 * @dev: the RDMA device
 * @addr: DMA address from iser_rs_dma_map_vmalloc_page()
 * @to_device: direction as mapped
 */
void iser_rs_dma_unmap_page(struct ib_device *dev, u64 addr, int to_device)
{
	ib_dma_unmap_page(dev, addr, PAGE_SIZE, iser_rs_dir(to_device));
	atomic_dec(&iser_rs_live[6]);
}

/**
 * iser_rs_dma_page_needs_sync() - whether a mapped page needs DMA syncs
 * @dev: the RDMA device
 * @addr: DMA address from iser_rs_dma_map_vmalloc_page()
 *
 * Return: true if ib_dma_sync_single_for_{cpu,device}() on the page may
 * do something (dma_need_sync(): a device without coherent DMA, bounce
 * buffers), or if the architecture's vmalloc aliases need the
 * iser_rs_vmap_range_*() flushes; false for a software device (rxe,
 * siw) and for coherent DMA on x86 and arm64. True also in a boot with
 * debug_pagealloc on (the suite's boot of the peer cases, and the debug
 * kernel, where it is on by default), so that the page-piece syncs that
 * rxe and siw do not need run there.
 */
bool iser_rs_dma_page_needs_sync(struct ib_device *dev, u64 addr)
{
#ifdef ARCH_IMPLEMENTS_FLUSH_KERNEL_VMAP_RANGE
	return true;
#else
	return debug_pagealloc_enabled() ||
	       (!ib_uses_virt_dma(dev) && dma_need_sync(dev->dma_device, addr));
#endif
}

/**
 * iser_rs_vmap_range_for_cpu() - invalidate_kernel_vmap_range()
 * @addr: start of a range of a vmalloc area the device wrote
 * @len: bytes
 *
 * Drops stale lines of the vmalloc alias on caches that alias (a no-op on
 * x86 and arm64), after the DMA sync for the CPU.
 */
void iser_rs_vmap_range_for_cpu(void *addr, size_t len)
{
	invalidate_kernel_vmap_range(addr, len);
}

/**
 * iser_rs_vmap_range_for_device() - flush_kernel_vmap_range()
 * @addr: start of a range of a vmalloc area the CPU wrote
 * @len: bytes
 *
 * Writes the vmalloc alias's lines back on caches that alias (a no-op on
 * x86 and arm64), before the DMA sync for the device.
 */
void iser_rs_vmap_range_for_device(void *addr, size_t len)
{
	flush_kernel_vmap_range(addr, len);
}

/**
 * iser_rs_device_max_sge() - the device's SGE limit per work request
 * @dev: the RDMA device
 * @recv: non-zero: receive work requests, else send work requests
 *
 * Return: attrs.max_recv_sge or attrs.max_send_sge (at most
 * inject_dev_max_sge when that is set).
 */
u32 iser_rs_device_max_sge(struct ib_device *dev, int recv)
{
	u32 n = recv ? dev->attrs.max_recv_sge : dev->attrs.max_send_sge;
	u32 cap = READ_ONCE(iser_rs_inject_dev_max_sge);

	return cap && cap < n ? cap : n;
}

/**
 * iser_rs_dma_map_sg() - ib_dma_map_sg()
 * @dev: the RDMA device
 * @sg: scatterlist
 * @nents: entries
 * @dir: non-zero: to the device
 *
 * Return: mapped entries, 0 on failure.
 */
int iser_rs_dma_map_sg(struct ib_device *dev, struct scatterlist *sg, int nents, int dir)
{
	return ib_dma_map_sg(dev, sg, nents, dir);
}

/**
 * iser_rs_dma_unmap_sg() - ib_dma_unmap_sg()
 * @dev: the RDMA device
 * @sg: scatterlist
 * @nents: entries as passed to the map
 * @dir: direction as mapped
 */
void iser_rs_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg, int nents, int dir)
{
	ib_dma_unmap_sg(dev, sg, nents, dir);
}

/**
 * iser_rs_alloc_pd() - ib_alloc_pd() without flags (no global rkey)
 * @dev: the RDMA device
 *
 * Return: the PD or an ERR_PTR().
 */
struct ib_pd *iser_rs_alloc_pd(struct ib_device *dev)
{
	/* No IB_PD_UNSAFE_GLOBAL_RKEY: iser-rs never exposes a global rkey. */
	return ib_alloc_pd(dev, 0);
}

/**
 * iser_rs_dealloc_pd() - ib_dealloc_pd()
 * @pd: a PD with no MR or QP left
 */
void iser_rs_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

/**
 * iser_rs_dereg_mr() - ib_dereg_mr()
 * @mr: the MR
 *
 * Return: 0 or a negative errno.
 */
int iser_rs_dereg_mr(struct ib_mr *mr)
{
	return ib_dereg_mr(mr);
}

/**
 * iser_rs_create_id() - rdma_create_id() for an RC connection (TCP port
 * space, init_net, as ib_iser's)
 * @handler: the CM event handler
 * @context: its context
 *
 * Return: the id or an ERR_PTR().
 */
struct rdma_cm_id *iser_rs_create_id(int (*handler)(struct rdma_cm_id *, struct rdma_cm_event *),
				     void *context)
{
	return rdma_create_id(&init_net, handler, context, RDMA_PS_TCP, IB_QPT_RC);
}

/**
 * iser_rs_shost_priv() - shost_priv()
 * @shost: the SCSI host
 *
 * Return: the host's private data.
 */
void *iser_rs_shost_priv(struct Scsi_Host *shost)
{
	return shost_priv(shost);
}

/**
 * iser_rs_device_max_qp_rd_atom() - the device's max_qp_rd_atom attribute
 * @dev: the RDMA device
 *
 * Return: the attribute.
 */
int iser_rs_device_max_qp_rd_atom(struct ib_device *dev)
{
	return dev->attrs.max_qp_rd_atom;
}

/**
 * iser_rs_now_ms() - milliseconds since boot, suspend included
 *
 * Return: ktime_get_boottime() in milliseconds.
 */
u64 iser_rs_now_ms(void)
{
	return ktime_to_ms(ktime_get_boottime());
}

/* Test only (case 071): early responses the receive path met; see below. */
static atomic_t iser_rs_early_rsps_met = ATOMIC_INIT(0);

/**
 * iser_rs_inject_early_rsp_met() - the receive path met an early response
 * @waiting: it found the command's transmit call on it and now waits
 *
 * Test only (case 071): ends an injected transmit stall
 * (iser_rs_inject_xmit_stall()), of any connection. A response refused as
 * not on the wire ends it; a wait for a transmit call to post (a response
 * or a Send completion; in case 071 only the early response) ends it too,
 * unless the test lowered the wait's bound (round bound: the stall must
 * outlast the wait and the refusal that follows it). Any context.
 */
void iser_rs_inject_early_rsp_met(bool waiting)
{
	if (waiting && READ_ONCE(iser_rs_inject_xmit_wait_ms))
		return;
	atomic_inc(&iser_rs_early_rsps_met);
}

/**
 * iser_rs_inject_xmit_stall() - a transmit call's injected stall
 * @ms: its bound, in milliseconds
 *
 * Test only (case 071): busy-waits (libiscsi's frwd_lock held, bottom
 * halves off) until the receive path met an early response
 * (iser_rs_inject_early_rsp_met()) or @ms passed. A stall that met its
 * response turns both stall parameters off: the commands after it go
 * unstalled. How it ended is kept for the case's log
 * (xmit_stall_last_ms, xmit_stall_last_met).
 */
void iser_rs_inject_xmit_stall(unsigned int ms)
{
	int met = atomic_read(&iser_rs_early_rsps_met);
	u64 start = ktime_get_mono_fast_ns();
	u64 now = start;
	bool ended = false;

	while (now - start < (u64)ms * NSEC_PER_MSEC) {
		if (atomic_read(&iser_rs_early_rsps_met) != met) {
			WRITE_ONCE(iser_rs_inject_xmit_stall_ms, 0);
			WRITE_ONCE(iser_rs_inject_xmit_posting_stall_ms, 0);
			ended = true;
			break;
		}
		udelay(100);
		now = ktime_get_mono_fast_ns();
	}
	WRITE_ONCE(iser_rs_xmit_stall_last_ms, div_u64(now - start, NSEC_PER_MSEC));
	WRITE_ONCE(iser_rs_xmit_stall_last_met, ended);
}

/**
 * iser_rs_mdelay() - mdelay()
 * @ms: how long to busy-wait, in milliseconds
 */
void iser_rs_mdelay(unsigned int ms)
{
	mdelay(ms);
}

/**
 * iser_rs_current_task_get() - a reference on the calling task
 * @nvcsw: where its count of voluntary context switches goes
 *
 * Return: current, with a reference the caller drops with
 * iser_rs_task_put().
 */
struct task_struct *iser_rs_current_task_get(unsigned long *nvcsw)
{
	*nvcsw = READ_ONCE(current->nvcsw);
	return get_task_struct(current);
}

/**
 * iser_rs_task_slept_since() - whether a task slept since a point
 * @t: a task the caller holds a reference on
 * @nvcsw: its voluntary context switch count at that point
 *
 * A task that is not running now, or that switched out voluntarily since
 * (it slept and was woken), has slept. A preempted task stays running
 * and counts its switches in nivcsw: it has not.
 *
 * Return: true if @t slept since @nvcsw was read.
 */
bool iser_rs_task_slept_since(struct task_struct *t, unsigned long nvcsw)
{
	return READ_ONCE(t->nvcsw) != nvcsw || !task_is_running(t);
}

/**
 * iser_rs_task_put() - drop what iser_rs_current_task_get() took
 * @t: the task
 */
void iser_rs_task_put(struct task_struct *t)
{
	put_task_struct(t);
}

/**
 * iser_rs_device_max_qp_wr() - the device's max_qp_wr attribute
 * @dev: the RDMA device
 *
 * Return: the most work requests one queue of a QP may hold.
 */
int iser_rs_device_max_qp_wr(struct ib_device *dev)
{
	return dev->attrs.max_qp_wr;
}

/**
 * iser_rs_device_sg_gaps_reg() - whether the device registers SG lists with gaps (IB_DEVICE_SG_GAPS_REG)
 * @dev: the RDMA device
 *
 * Return: true if it can.
 */
bool iser_rs_device_sg_gaps_reg(struct ib_device *dev)
{
	return dev->attrs.kernel_cap_flags & IBK_SG_GAPS_REG;
}

/**
 * iser_rs_cls_session_to_shost() - iscsi_session_to_shost()
 * @s: the class session
 *
 * Return: the session's SCSI host.
 */
struct Scsi_Host *iser_rs_cls_session_to_shost(struct iscsi_cls_session *s)
{
	return iscsi_session_to_shost(s);
}

/**
 * iser_rs_device_dma_parent() - the device that does the DMA of an RDMA device (dev.parent or its own)
 * @dev: the RDMA device
 *
 * Return: the DMA device.
 */
struct device *iser_rs_device_dma_parent(struct ib_device *dev)
{
	return dev->dev.parent;
}

/**
 * iser_rs_sg_dma_address() - sg_dma_address()
 * @sg: a mapped scatterlist entry
 *
 * Return: its DMA address.
 */
u64 iser_rs_sg_dma_address(struct scatterlist *sg)
{
	return sg_dma_address(sg);
}

/**
 * iser_rs_conn_failure_frwd_locked() - report a connection failure from
 * inside xmit_task
 * @conn: the libiscsi connection the task is being sent on
 * @err: the iSCSI error to report to iscsid
 *
 * What iscsi_conn_failure() does, for a caller that already holds the
 * session's frwd_lock: libiscsi calls ->xmit_task under it (queuecommand
 * and __iscsi_conn_send_pdu on a host without an xmit workqueue), and
 * iscsi_conn_failure() takes it again, which spins forever with BH off.
 * Marks the session failed and the connection suspended as libiscsi's
 * iscsi_set_conn_failed() does, then queues the error event (which takes
 * only the class connection's own lock).
 */
void iser_rs_conn_failure_frwd_locked(struct iscsi_conn *conn, int err)
{
	struct iscsi_session *session = conn->session;

	lockdep_assert_held(&session->frwd_lock);
	if (session->state == ISCSI_STATE_FAILED)
		return;
	if (conn->stop_stage == 0)
		session->state = ISCSI_STATE_FAILED;
	set_bit(ISCSI_CONN_FLAG_SUSPEND_TX, &conn->flags);
	set_bit(ISCSI_CONN_FLAG_SUSPEND_RX, &conn->flags);
	iscsi_conn_error_event(conn->cls_conn, err);
}

/**
 * iser_rs_task_unsol_data_out_posted() - account one posted unsolicited
 * Data-Out
 * @task: the command whose Data-Out iscsi_prep_data_out_pdu() just built
 *
 * iscsi_prep_data_out_pdu() sets r2t->data_count but leaves r2t->sent to
 * the transport (iscsi_tcp and ib_iser add it once the PDU is queued);
 * without this, iscsi_task_has_unsol_data() never turns false.
 */
void iser_rs_task_unsol_data_out_posted(struct iscsi_task *task)
{
	task->unsol_r2t.sent += task->unsol_r2t.data_count;
}

/**
 * iser_rs_back_lock() - take the session's back_lock (BH off)
 * @conn: a bound libiscsi connection
 *
 * libiscsi's task lookup (iscsi_itt_to_ctask) and cleanup_task run under
 * it; the receive path holds it from the lookup to the last use of the
 * task's transport data, so the error handler cannot clean the task up in
 * between. Never held across a call into libiscsi.
 */
void iser_rs_back_lock(struct iscsi_conn *conn)
{
	spin_lock_bh(&conn->session->back_lock);
}

/**
 * iser_rs_back_unlock() - release what iser_rs_back_lock() took
 * @conn: the same connection
 */
void iser_rs_back_unlock(struct iscsi_conn *conn)
{
	spin_unlock_bh(&conn->session->back_lock);
}

/**
 * iser_rs_tasks_lock() - take the session's frwd_lock, then its back_lock
 * @conn: a live libiscsi connection (bound, or unbound by ep_disconnect,
 *        which libiscsi frees only after that call returned)
 *
 * With both held no task of the session changes hands: libiscsi allocates
 * tasks and calls ->alloc_pdu and ->xmit_task under frwd_lock, completes
 * them and calls ->cleanup_task under back_lock (which nests inside
 * frwd_lock). Process context only; never held across a call into
 * libiscsi.
 */
void iser_rs_tasks_lock(struct iscsi_conn *conn)
{
	spin_lock_bh(&conn->session->frwd_lock);
	spin_lock(&conn->session->back_lock);
}

/**
 * iser_rs_tasks_unlock() - release what iser_rs_tasks_lock() took
 * @conn: the same connection
 */
void iser_rs_tasks_unlock(struct iscsi_conn *conn)
{
	spin_unlock(&conn->session->back_lock);
	spin_unlock_bh(&conn->session->frwd_lock);
}

/**
 * iser_rs_session_task() - the session's task at index @i
 * @conn: a live libiscsi connection, its session's task locks held
 * @i: an index below the session's cmds_max
 *
 * Return: the task (libiscsi allocates all of them at session setup and
 * frees them at session teardown), or NULL past cmds_max.
 */
struct iscsi_task *iser_rs_session_task(struct iscsi_conn *conn, u32 i)
{
	struct iscsi_session *session = conn->session;

	if (i >= (u32)session->cmds_max)
		return NULL;
	return session->cmds[i];
}

/**
 * iser_rs_delayed_work_init() - INIT_DELAYED_WORK()
 * @dw: the work item, in its final (pinned) place
 * @fn: its function
 */
void iser_rs_delayed_work_init(struct delayed_work *dw, void (*fn)(struct work_struct *))
{
	INIT_DELAYED_WORK(dw, fn);
}

/**
 * iser_rs_to_delayed_work() - to_delayed_work()
 * @work: the work_struct a work function was called with
 *
 * Return: the delayed_work containing it.
 */
struct delayed_work *iser_rs_to_delayed_work(struct work_struct *work)
{
	return to_delayed_work(work);
}

/* Serialises the look at a pending item's time with its change. */
static DEFINE_SPINLOCK(iser_rs_delayed_work_lock);

/**
 * iser_rs_delayed_work_queue() - queue_delayed_work() on system_percpu_wq
 *	(the per-CPU system workqueue that replaces system_wq; 7.x warns of a
 *	work item queued on system_wq), the earliest time winning
 * @dw: an initialised work item
 * @delay_ms: this long from now (rounded up to a jiffy); a work item
 *	already pending for a later time is moved to this one, one pending
 *	for an earlier time (or queued to run now) keeps it
 *
 * Any context but hardirq. Several callers each wanting the handler to
 * run by their own time (one work item serves several deadlines) get the
 * earliest, best effort: a timer that fires during the look is queued
 * again for @delay_ms, so the handler checks each deadline and schedules
 * again for what is left.
 */
void iser_rs_delayed_work_queue(struct delayed_work *dw, unsigned int delay_ms)
{
	unsigned long delay = delay_ms ? msecs_to_jiffies(delay_ms) : 0;
	unsigned long flags;

	spin_lock_irqsave(&iser_rs_delayed_work_lock, flags);
	if (!queue_delayed_work(system_percpu_wq, dw, delay) && timer_pending(&dw->timer) &&
	    time_after(READ_ONCE(dw->timer.expires), jiffies + delay))
		mod_delayed_work(system_percpu_wq, dw, delay);
	spin_unlock_irqrestore(&iser_rs_delayed_work_lock, flags);
}

/**
 * iser_rs_delayed_work_cancel_sync() - cancel_delayed_work_sync()
 * @dw: an initialised work item
 *
 * Returns when the item is neither pending nor running. Process context.
 */
void iser_rs_delayed_work_cancel_sync(struct delayed_work *dw)
{
	cancel_delayed_work_sync(dw);
}

/** iser_rs_local_bh_disable() - local_bh_disable() */
void iser_rs_local_bh_disable(void)
{
	local_bh_disable();
}

/** iser_rs_local_bh_enable() - local_bh_enable() */
void iser_rs_local_bh_enable(void)
{
	local_bh_enable();
}
