#!/bin/sh
# Runs inside a container worker before every start of its containerd (ExecStartPre of the drop-in
# components/worker_node.py installs): every runtime the CRI plugin's config declares gets
# privileged_without_host_devices = true, so a privileged pod no longer receives the node's devices,
# which in a privileged container are the host's (containerd internal/cri/server/container_create.go
# @v2.3.4: without it, oci.WithHostDevices). kind's config.toml imports no drop-in, and containerd 1.7
# (in kindest/node images built before kind v0.27.0, images/base/Dockerfile@v0.26.0, which a tenant on an
# older Kubernetes may run) replaces a whole plugin section from an import (services/server/config/config.go
# @v1.7.29, mergeConfig), so the key goes into the file itself.
# The file is edited in place; kind's entrypoint edits it before systemd starts (images/base/files/
# usr/local/bin/entrypoint@v0.33.0-alpha, configure_containerd), and this runs after it.
# Idempotent: any earlier value of the key is dropped and written again under each runtime table,
# in the v2 layout ("io.containerd.grpc.v1.cri") or the v3 one ("io.containerd.cri.v1.runtime").
# A runtime written any other way is left as it is; join-worker.sh proves the result through the CRI.
#
# args:   $1 optional, the config file (default /etc/containerd/config.toml, containerd's default path)
set -eu
config=${1:-/etc/containerd/config.toml}
quote="[\"']"
runtime_table="^\\[plugins\\.${quote}io\\.containerd\\.(grpc\\.v1\\.cri|cri\\.v1\\.runtime)${quote}\\.containerd\\.runtimes\\.[A-Za-z0-9_-]+\\][[:space:]]*(#.*)?\$"
sed -i -E \
	-e '/^[[:space:]]*privileged_without_host_devices[[:space:]]*=/d' \
	-e "/${runtime_table}/a privileged_without_host_devices = true" \
	"$config"
