/* SPDX-License-Identifier: GPL-2.0 */
/*
 * iser-rs C shim: what Rust cannot reach through bindgen: wrappers over
 * static inline functions and macros, the module parameters (Rust module
 * parameters arrive in 6.19), and two small pieces of libiscsi bookkeeping
 * that libiscsi leaves to its transports (each documented at its
 * definition in iser_shim.c).
 */
#ifndef ISER_RS_SHIM_H
#define ISER_RS_SHIM_H
#include <linux/types.h>
#include <linux/spinlock_types.h>

/* Module parameters, named like ib_iser's (see iser_shim.c). */
extern unsigned int iser_rs_max_sectors;
extern unsigned int iser_rs_max_lun;
extern int iser_rs_debug_level;
extern bool iser_rs_inline_sends;
extern unsigned int iser_rs_signal_every;
extern unsigned int iser_rs_sq_depth;
extern bool iser_rs_hello;
extern unsigned int iser_rs_inject_send_pdu_delay_ms;
extern unsigned int iser_rs_inject_send_pdu_busy_ms;
extern unsigned int iser_rs_inject_setup_delay_ms;
extern unsigned int iser_rs_inject_disconnect_delay_ms;
extern unsigned int iser_rs_inject_xmit_stall_ms;
extern unsigned int iser_rs_inject_xmit_posting_stall_ms;
extern unsigned int iser_rs_inject_xmit_wait_ms;
extern unsigned int iser_rs_inject_logout_rsp_delay_ms;
extern unsigned int iser_rs_inject_qp_send_sge;

/* True when some module already registered an iSCSI transport "name". */
bool iser_rs_transport_name_taken(const char *name);
struct ib_device;
struct ib_pd;
struct ib_qp;
struct ib_mr;
struct ib_send_wr;
struct ib_recv_wr;
struct scatterlist;
struct rdma_cm_id;
struct rdma_cm_event;
struct scsi_cmnd;
struct iscsi_task;
struct sockaddr;
struct Scsi_Host;

/* Module-wide live-object counters (read-only parameters live_*). */
void iser_rs_live_add(int which, int delta);

/* Test-only post-failure injection (debugfs fail_iser_rs_post/). */
void iser_rs_fault_init(void);
void iser_rs_fault_exit(void);

/* Forwards of static inline functions and macros (one line each). */
/*
 * Non-zero while the test-only post fault injection is armed: the Rust
 * posts then go through the two calls below instead of the provider.
 */
extern const unsigned long *const iser_rs_fail_post_armed;
int iser_rs_post_send(struct ib_qp *qp, const struct ib_send_wr *wr, u32 *posted);
int iser_rs_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr);
u64 iser_rs_dma_map_single(struct ib_device *dev, void *addr, size_t len, int to_device);
void iser_rs_dma_unmap_single(struct ib_device *dev, u64 addr, size_t len, int to_device);
int iser_rs_dma_mapping_error(struct ib_device *dev, u64 addr);
void iser_rs_dma_sync_for_cpu(struct ib_device *dev, u64 addr, size_t len, int to_device);
void iser_rs_dma_sync_for_device(struct ib_device *dev, u64 addr, size_t len, int to_device);
int iser_rs_dma_map_vmalloc_page(struct ib_device *dev, void *addr, int to_device, u64 *dma);
void iser_rs_dma_unmap_page(struct ib_device *dev, u64 addr, int to_device);
void iser_rs_vmap_range_for_cpu(void *addr, size_t len);
bool iser_rs_dma_page_needs_sync(struct ib_device *dev, u64 addr);
void iser_rs_vmap_range_for_device(void *addr, size_t len);
u32 iser_rs_device_max_sge(struct ib_device *dev, int recv);
u64 iser_rs_sg_dma_address(struct scatterlist *sg);
int iser_rs_dma_map_sg(struct ib_device *dev, struct scatterlist *sg, int nents, int dir);
void iser_rs_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg, int nents, int dir);
struct ib_pd *iser_rs_alloc_pd(struct ib_device *dev);
void iser_rs_rcu_read_lock(void);
void iser_rs_assert_bh_off(void);
void iser_rs_rcu_read_unlock(void);
void iser_rs_synchronize_rcu(void);
unsigned int iser_rs_noio_save(void);
void iser_rs_noio_restore(unsigned int flags);
spinlock_t *iser_rs_bh_lock_new(void);
void iser_rs_bh_lock_free(spinlock_t *lock);
void iser_rs_spin_lock_bh(spinlock_t *lock);
void iser_rs_spin_unlock_bh(spinlock_t *lock);
void iser_rs_task_unsol_data_out_posted(struct iscsi_task *task);
struct iscsi_conn;
void iser_rs_conn_failure_frwd_locked(struct iscsi_conn *conn, int err);
void iser_rs_back_lock(struct iscsi_conn *conn);
void iser_rs_back_unlock(struct iscsi_conn *conn);
void iser_rs_tasks_lock(struct iscsi_conn *conn);
void iser_rs_tasks_unlock(struct iscsi_conn *conn);
struct iscsi_task *iser_rs_session_task(struct iscsi_conn *conn, u32 i);
void iser_rs_dealloc_pd(struct ib_pd *pd);
int iser_rs_dereg_mr(struct ib_mr *mr);
struct rdma_cm_id *iser_rs_create_id(int (*handler)(struct rdma_cm_id *, struct rdma_cm_event *),
				     void *context);
struct delayed_work;
struct work_struct;
void iser_rs_delayed_work_init(struct delayed_work *dw, void (*fn)(struct work_struct *));
struct delayed_work *iser_rs_to_delayed_work(struct work_struct *work);
void iser_rs_delayed_work_queue(struct delayed_work *dw, unsigned int delay_ms);
void iser_rs_delayed_work_cancel_sync(struct delayed_work *dw);
void iser_rs_local_bh_disable(void);
void iser_rs_local_bh_enable(void);
void *iser_rs_shost_priv(struct Scsi_Host *shost);
struct iscsi_cls_session;
struct Scsi_Host *iser_rs_cls_session_to_shost(struct iscsi_cls_session *s);
int iser_rs_device_max_qp_rd_atom(struct ib_device *dev);
int iser_rs_device_max_qp_wr(struct ib_device *dev);
u64 iser_rs_now_ms(void);
void iser_rs_mdelay(unsigned int ms);
void iser_rs_inject_early_rsp_met(bool waiting);
void iser_rs_inject_xmit_stall(unsigned int ms);
struct task_struct;
struct task_struct *iser_rs_current_task_get(unsigned long *nvcsw);
bool iser_rs_task_slept_since(struct task_struct *t, unsigned long nvcsw);
void iser_rs_task_put(struct task_struct *t);
bool iser_rs_device_sg_gaps_reg(struct ib_device *dev);
struct device *iser_rs_device_dma_parent(struct ib_device *dev);
#endif
