#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
int peer_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int peer_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int peer_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int peer_req_notify_cq(struct ibv_cq *cq, int solicited_only);
