#!/usr/bin/env bash
# Makes a worker advertise its mock GPUs to HAMi. HAMi's mock device plugin
# only turns the node annotation hami.io/node-nvidia-register into
# nvidia.com/gpumem|gpucores resources; it needs nvidia.com/gpu in the node's
# status capacity too, and nothing else puts it there. kubelet zeroes that
# capacity whenever it restarts, so a systemd timer inside the worker re-applies
# both every 20 s using the node's own kubelet credentials (the Node authorizer
# lets a kubelet patch its own Node and Node status). hami.io/node-handshake is
# left to the HAMi scheduler. Re-running overwrites the installed files.
#
# env:    NODE               worker container or machine name = Kubernetes node name
#         NODE_TRANSPORT     optional, docker (default) or ssh, with the SSH_* variables (scripts/lib.sh)
#         GPU_REGISTER_JSON  value for annotation hami.io/node-nvidia-register (JSON array)
#         GPU_CAPACITY       value for status.capacity["nvidia.com/gpu"] (positive integer)
#         BOOT_TIMEOUT       optional, seconds to wait for systemd in a container, or for a machine to answer (default 90)
#         REGISTER_TIMEOUT   optional, seconds to wait for the first successful run (default 120)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env NODE GPU_REGISTER_JSON GPU_CAPACITY
[[ $GPU_CAPACITY =~ ^[1-9][0-9]*$ ]] || die "GPU_CAPACITY must be a positive integer, got '$GPU_CAPACITY'"
[[ $GPU_REGISTER_JSON =~ ^[[:space:]]*\[.*\][[:space:]]*$ ]] || die "GPU_REGISTER_JSON must be a JSON array"
register_timeout=${REGISTER_TIMEOUT:-120}

unit=hami-mock-gpu-register
config_dir=/etc/hami-mock-gpu

wait_for_node "${BOOT_TIMEOUT:-90}"
node_exec test -e /etc/kubernetes/kubelet.conf ||
	die "$NODE has not joined its tenant (no /etc/kubernetes/kubelet.conf); run join-worker.sh first"

# write_node_file PATH MODE: write stdin to PATH in the worker, replacing it
# atomically so a timer run never sees a half-written file.
write_node_file() {
	# shellcheck disable=SC2016 # expanded by the node's shell
	node_exec -i sh -c 'mkdir -p "$(dirname "$1")" && cat >"$1.new" && chmod "$2" "$1.new" && mv -f "$1.new" "$1"' \
		write_node_file "$1" "$2"
}

# The node's name as its tenant knows it: a machine's hostname may be another.
write_node_file "$config_dir/node-name" 0644 <<<"$NODE"
write_node_file "$config_dir/node-nvidia-register.json" 0644 <<<"$GPU_REGISTER_JSON"
write_node_file "$config_dir/gpu-capacity" 0644 <<<"$GPU_CAPACITY"

write_node_file "/usr/local/bin/$unit" 0755 <<SCRIPT
#!/usr/bin/env bash
# Installed by kamaji-hami-lab (scripts/register-gpus.sh): advertises this
# node's mock GPUs to HAMi with the node's own kubelet credentials.
set -euo pipefail
node=\$(cat $config_dir/node-name)
register_json=\$(cat $config_dir/node-nvidia-register.json)
gpu_capacity=\$(cat $config_dir/gpu-capacity)
as_kubelet() { kubectl --kubeconfig=/etc/kubernetes/kubelet.conf --request-timeout=10s "\$@"; }

as_kubelet annotate node "\$node" --overwrite "hami.io/node-nvidia-register=\$register_json"
# Capacity is only writable through the status subresource; kubelet copies it to allocatable.
as_kubelet patch node "\$node" --subresource=status --type=json \\
	-p "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"\$gpu_capacity\"}]"
SCRIPT

write_node_file "/etc/systemd/system/$unit.service" 0644 <<UNIT
[Unit]
Description=Advertise mock GPUs to HAMi (node annotation + nvidia.com/gpu capacity)
After=kubelet.service

[Service]
Type=oneshot
ExecStart=/usr/local/bin/$unit
TimeoutStartSec=60
UNIT

write_node_file "/etc/systemd/system/$unit.timer" 0644 <<UNIT
[Unit]
Description=Re-advertise mock GPUs to HAMi at boot and every 20s (kubelet resets the capacity when it restarts)

[Timer]
OnBootSec=10s
OnUnitActiveSec=20s
AccuracySec=1s

[Install]
WantedBy=timers.target
UNIT

node_exec systemctl daemon-reload >&2
node_exec systemctl enable --now "$unit.timer" >&2

# A oneshot unit's `systemctl start` returns only when the run has finished, with its result.
first_run() { node_exec systemctl start "$unit.service" >&2; }
retry "$register_timeout" "$RETRY_INTERVAL" first_run ||
	die "mock GPU registration on $NODE did not succeed within ${register_timeout}s (see: journalctl -u $unit.service on $NODE)"
log "$NODE advertises nvidia.com/gpu=$GPU_CAPACITY and its hami.io/node-nvidia-register annotation"
