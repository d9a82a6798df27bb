/* The UCX headers commbench-ucx binds: UCP (the tag API) and UCS status codes. */
#include <ucp/api/ucp.h>
#include <ucs/type/status.h>
