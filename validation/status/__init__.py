"""python -m validation.status: every tenant's control plane, nodes, GPU slices and quotas at a glance.

Read-only: it only runs `kubectl get`, with the same stack outputs and kubeconfig handling as the
validation suite. The management cluster and every tenant are read side by side, each within
CLUSTER_BOUND, so one slow or unreachable cluster never holds back the others' rows.

One job per module: gather reads the clusters, rows turns their answers into the document `--json`
prints, render draws that document as a frame, cli parses the arguments and loops for --watch.
"""
