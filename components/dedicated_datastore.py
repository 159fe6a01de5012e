"""A tenant's own etcd DataStore: a kamaji-etcd release of its own in the management cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.commands import script_command
from components.platform import HELM_TIMEOUT_SECONDS, KAMAJI_ETCD_CHART, KAMAJI_REPO

# The chart Kamaji's own bundles as the shared DataStore, pinned to the same version (scripts/render_charts.py
# checks both against the repository).
KAMAJI_ETCD_CHART_NAME = "kamaji-etcd"
KAMAJI_ETCD_CHART_VERSION = KAMAJI_ETCD_CHART.removeprefix(f"{KAMAJI_ETCD_CHART_NAME}-")
# One member: the lab runs on one host, where more members add memory and disk but no independent failure.
DEDICATED_ETCD_REPLICAS = 1
# Sized for one tenant; scripts/preflight.py (SIZING_GIB) counts its volume. etcd refuses writes beyond its quota
# (--quota-backend-bytes), which the volume holds with room for its write-ahead log and snapshots.
DEDICATED_ETCD_QUOTA_BYTES = 2 << 30
DEDICATED_ETCD_VOLUME_MIB = 2560


@dataclass(frozen=True)
class DedicatedDataStoreArgs:
    data_store: str
    """Names the DataStore, and its namespace, Helm release and etcd StatefulSet."""
    provider: k8s.Provider
    """Provider of the management cluster."""
    management_kubeconfig: pulumi.Input[str]
    """Secret; for the wait until Kamaji reports it ready, and its deletion."""
    platform: pulumi.Resource
    """cert-manager issues its certificates and Kamaji reads it: both must be up."""


class DedicatedDataStore(pulumi.ComponentResource):
    """One tenant's etcd, with its own CA and root credentials, as a Kamaji DataStore.

    `ready` completes once Kamaji reports the DataStore ready. On destroy (after the tenant's control plane, which
    depends on it) it deletes the DataStore while Kamaji runs, and refuses while a control plane still has its data
    there; the release, its volume and its namespace go after it.
    """

    def __init__(self, name: str, args: DedicatedDataStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("kamaji-hami-lab:index:DedicatedDataStore", name, None, opts)
        store = args.data_store
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.platform])
        namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata={"name": store}, opts=on_cluster)
        in_namespace = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[namespace]))
        # The root of its own CA: the chart's CA Certificate is issued by this self-signed issuer, and its own
        # Issuer signs the server, peer and root client certificates with that CA.
        issuer = k8s.apiextensions.CustomResource(
            f"{name}-issuer",
            api_version="cert-manager.io/v1",
            kind="Issuer",
            metadata={"name": issuer_name(store), "namespace": store},
            spec={"selfSigned": {}},
            opts=in_namespace,
        )
        release = k8s.helm.v3.Release(
            f"{name}-etcd",
            name=store,
            chart=KAMAJI_ETCD_CHART_NAME,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KAMAJI_REPO),
            version=KAMAJI_ETCD_CHART_VERSION,
            namespace=store,
            values=dedicated_etcd_values(store),
            timeout=HELM_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=[issuer])),
        )
        self.ready = script_command(
            f"{name}-ready",
            "wait-datastore.sh",
            {"KUBECONFIG_DATA": args.management_kubeconfig, "DATASTORE": store, "REFUSE_IF_USED": "true"},
            delete="delete-datastore.sh",
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[release], custom_timeouts=pulumi.CustomTimeouts(create="11m")
            ),
        )
        self.register_outputs({})


def issuer_name(data_store: str) -> str:
    return f"{data_store}-selfsigned"


def dedicated_etcd_values(data_store: str) -> dict:
    """kamaji-etcd's values for a tenant's own etcd (clastix/kamaji-etcd charts/kamaji-etcd/values.yaml and
    templates/@92f31f0).

    Its certificates come from cert-manager, as the shared store's do (charts/kamaji/values.yaml@26.8.2-edge,
    kamaji-etcd.certManager), but from a CA of its own: the chart's `<name>-ca` Certificate, issued by the
    self-signed Issuer beside it (etcd_cert-manager_ca.yaml), signs `<name>-server-certs`, `<name>-peer-certs`
    and the root client certificate `<name>-client-certs` (CN root) that Kamaji uses (etcd_datastore.yaml,
    with certManager.enabled). The chart's post-install Job creates the root user and turns on authentication
    (etcd_job_preinstall_2.yaml).
    """
    return {
        "fullnameOverride": data_store,
        "replicas": DEDICATED_ETCD_REPLICAS,
        "quotaBackendBytes": str(DEDICATED_ETCD_QUOTA_BYTES),
        # Deleting the StatefulSet (the release) deletes its volume and the tenant's data with it.
        "persistentVolumeClaim": {"size": f"{DEDICATED_ETCD_VOLUME_MIB}Mi", "retentionPolicyWhenDeleted": "Delete"},
        "selfSignedCertificates": {"enabled": False},
        "certManager": {
            "enabled": True,
            "issuerRef": {"name": issuer_name(data_store), "kind": "Issuer", "group": "cert-manager.io"},
        },
        "datastore": {"enabled": True, "name": data_store},
    }
