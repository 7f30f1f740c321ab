/* What src/verbs.rs takes from rdma-core's headers, printed "NAME VALUE"
 * a line, by the names verbs::layout() uses: tests/verbs_layout.rs
 * compiles this against the installed headers and compares. */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>

#define OFF(type, member) printf("%s.%s %zu\n", #type, #member, offsetof(struct type, member))
#define SIZE(type) printf("%s %zu\n", #type, sizeof(struct type))
#define VAL(name) printf("%s %ld\n", #name, (long)(name))

int main(void)
{
    OFF(ibv_context, ops.poll_cq);
    OFF(ibv_context, ops.post_send);
    OFF(ibv_mr, addr);
    OFF(ibv_mr, lkey);
    OFF(ibv_mr, rkey);
    OFF(rdma_cm_id, verbs);
    OFF(rdma_cm_id, qp);
    OFF(rdma_cm_id, route);
    OFF(rdma_cm_id, port_num);
    OFF(rdma_route, addr.addr.ibaddr.sgid);
    OFF(rdma_route, path_rec);
    OFF(rdma_route, num_paths);
    OFF(ibv_sa_path_rec, mtu);
    OFF(rdma_cm_event, id);
    OFF(rdma_cm_event, listen_id);
    OFF(rdma_cm_event, event);
    OFF(rdma_cm_event, status);
    OFF(rdma_cm_event, param.conn.private_data);
    OFF(rdma_cm_event, param.conn.private_data_len);
    OFF(rdma_conn_param, private_data_len);
    OFF(rdma_conn_param, retry_count);
    OFF(rdma_conn_param, rnr_retry_count);
    OFF(rdma_conn_param, srq);
    OFF(rdma_conn_param, qp_num);
    OFF(ibv_sge, length);
    OFF(ibv_sge, lkey);
    OFF(ibv_send_wr, sg_list);
    OFF(ibv_send_wr, num_sge);
    OFF(ibv_send_wr, opcode);
    OFF(ibv_send_wr, send_flags);
    OFF(ibv_send_wr, wr.rdma.remote_addr);
    OFF(ibv_send_wr, wr.rdma.rkey);
    OFF(ibv_qp_init_attr, send_cq);
    OFF(ibv_qp_init_attr, recv_cq);
    OFF(ibv_qp_init_attr, cap);
    OFF(ibv_qp_init_attr, qp_type);
    OFF(ibv_qp_init_attr, sq_sig_all);
    OFF(ibv_qp_cap, max_inline_data);
    OFF(ibv_wc, status);
    OFF(ibv_wc, opcode);
    OFF(ibv_wc, vendor_err);
    OFF(ibv_wc, byte_len);
    VAL(RDMA_PS_TCP);
    VAL(IBV_QPT_RC);
    VAL(IBV_WR_RDMA_WRITE);
    VAL(IBV_WR_RDMA_READ);
    VAL(IBV_SEND_SIGNALED);
    VAL(IBV_ACCESS_LOCAL_WRITE);
    VAL(IBV_ACCESS_REMOTE_WRITE);
    VAL(IBV_ACCESS_REMOTE_READ);
    VAL(RDMA_CM_EVENT_ADDR_RESOLVED);
    VAL(RDMA_CM_EVENT_ADDR_ERROR);
    VAL(RDMA_CM_EVENT_ROUTE_RESOLVED);
    VAL(RDMA_CM_EVENT_ROUTE_ERROR);
    VAL(RDMA_CM_EVENT_CONNECT_REQUEST);
    VAL(RDMA_CM_EVENT_CONNECT_RESPONSE);
    VAL(RDMA_CM_EVENT_CONNECT_ERROR);
    VAL(RDMA_CM_EVENT_UNREACHABLE);
    VAL(RDMA_CM_EVENT_REJECTED);
    VAL(RDMA_CM_EVENT_ESTABLISHED);
    VAL(RDMA_CM_EVENT_DISCONNECTED);
    VAL(RDMA_CM_EVENT_DEVICE_REMOVAL);
    VAL(RDMA_CM_EVENT_ADDR_CHANGE);
    VAL(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    SIZE(rdma_conn_param);
    SIZE(ibv_sge);
    SIZE(ibv_send_wr);
    SIZE(ibv_qp_init_attr);
    SIZE(ibv_wc);
    return 0;
}
