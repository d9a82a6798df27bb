/* See shim.h: each cb_fi_X is the static-inline fi_X of the libfabric headers. */
#include "shim.h"

struct fi_info *cb_fi_allocinfo(void) { return fi_allocinfo(); }
int cb_fi_close(struct fid *fid) { return fi_close(fid); }

int cb_fi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
                 void *context)
{
    return fi_domain(fabric, info, domain, context);
}

int cb_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
                  void *context)
{
    return fi_cq_open(domain, attr, cq, context);
}

int cb_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
                  void *context)
{
    return fi_av_open(domain, attr, av, context);
}

int cb_fi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
                    uint64_t flags, void *context)
{
    return fi_av_insert(av, addr, count, fi_addr, flags, context);
}

int cb_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
                 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
                 void *context)
{
    return fi_mr_reg(domain, buf, len, access, offset, requested_key, flags, mr, context);
}

void *cb_fi_mr_desc(struct fid_mr *mr) { return fi_mr_desc(mr); }

int cb_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                   void *context)
{
    return fi_endpoint(domain, info, ep, context);
}

int cb_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags)
{
    return fi_ep_bind(ep, bfid, flags);
}

int cb_fi_enable(struct fid_ep *ep) { return fi_enable(ep); }

int cb_fi_getname(struct fid *fid, void *addr, size_t *addrlen)
{
    return fi_getname(fid, addr, addrlen);
}

ssize_t cb_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags)
{
    return fi_cq_readerr(cq, buf, flags);
}

const char *cb_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf,
                              size_t len)
{
    return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}

