/*
 * Real symbols for the libfabric calls commbench-ofi makes that the headers define as static
 * inline (they dispatch through each object's ops table), so that Rust can call them (the four
 * calls of the timed loops are dispatched in Rust, src/sys.rs). Each
 * cb_fi_X(...) is exactly fi_X(...).
 */
#ifndef COMMBENCH_OFI_SHIM_H
#define COMMBENCH_OFI_SHIM_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>

struct fi_info *cb_fi_allocinfo(void);
int cb_fi_close(struct fid *fid);
int cb_fi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
                 void *context);
int cb_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
                  void *context);
int cb_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
                  void *context);
int cb_fi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
                    uint64_t flags, void *context);
int cb_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
                 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
                 void *context);
void *cb_fi_mr_desc(struct fid_mr *mr);
int cb_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                   void *context);
int cb_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags);
int cb_fi_enable(struct fid_ep *ep);
int cb_fi_getname(struct fid *fid, void *addr, size_t *addrlen);
ssize_t cb_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags);
const char *cb_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf,
                              size_t len);

#endif
