"""Which of a tenant's namespaces belong to the lab rather than to the team that uses the tenant.

The lab's own pods there (HAMi, flannel, kube-proxy, CoreDNS) need host access, so Pod Security exempts them; for
the same reason the team's credential may not write into them.
"""

from __future__ import annotations

from components.flannel import FLANNEL_NAMESPACE
from components.gpu_sharing import HAMI_NAMESPACE
from components.kube_proxy import NAMESPACE as KUBE_PROXY_NAMESPACE

# Sorted and without repeats (HAMi and kube-proxy share kube-system), so specs built from it stay stable.
EXEMPT_NAMESPACES: tuple[str, ...] = tuple(sorted({FLANNEL_NAMESPACE, HAMI_NAMESPACE, KUBE_PROXY_NAMESPACE}))
