#!/usr/bin/env bash
# Refuses to create a container worker at a fixed address that another container on the
# lab's network has, running or stopped. Docker holds a fixed address only while its
# container runs: a stop releases the endpoint and its address, and keeps only the
# container's own request for it (moby/moby daemon/start.go Cleanup and
# daemon/container_operations.go releaseNetwork, cleanOperationalData@v28.5.2). A worker
# of another lab whose name hashes to the same address could then take it while this
# one's tenant sleeps, and whichever starts second never comes up. Its own container
# (a worker already there, on a re-run of `up`) is no clash.
#
# env:    WORKER          the worker's container name
#         WORKER_ADDRESS  the fixed IPv4 address the lab plans for it (components/addresses.py)
#         KIND_NETWORK    the lab's docker network
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env WORKER WORKER_ADDRESS KIND_NETWORK
network=$KIND_NETWORK

# Stopped containers too: the filter goes by each container's own network settings (daemon/list.go@v28.5.2).
ids=$(docker ps --all --quiet --filter "network=$network") ||
	die "cannot list the containers on docker network $network to check worker $WORKER's address $WORKER_ADDRESS"
if [[ -z $ids ]]; then
	log "no container on docker network $network has $WORKER_ADDRESS, worker $WORKER's address"
	exit 0
fi
# Per container: name|state|the address it asked for (a stopped one keeps the request)|the one it has now.
# A container without a fixed address has no IPAMConfig; Docker 29 prints an unset address as "invalid IP"
# (api/types/network/endpoint.go@docker-v29.7.2, netip.Addr), which equals no planned one.
# shellcheck disable=SC2086 # one argument per container id
listing=$(docker inspect --format "{{.Name}}|{{.State.Status}}|{{with index .NetworkSettings.Networks \"$network\"}}{{with .IPAMConfig}}{{.IPv4Address}}{{end}}|{{.IPAddress}}{{end}}" $ids) ||
	die "cannot inspect the containers on docker network $network to check worker $WORKER's address $WORKER_ADDRESS"
while IFS='|' read -r name state requested current; do
	name=${name#/}
	[[ $name != "$WORKER" ]] || continue
	if [[ $requested == "$WORKER_ADDRESS" ]]; then
		holds="has it as its fixed address, which Docker gives it back whenever it starts"
	elif [[ ${current:-} == "$WORKER_ADDRESS" ]]; then
		holds="has it now"
	else
		continue
	fi
	die "cannot give worker $WORKER its fixed address $WORKER_ADDRESS on docker network $network: container $name ($state) $holds, and of two containers on one address the second to start fails. The address is a hash of the worker's name: rename the tenant or set another kamaji-hami-lab:managementClusterName, or remove container $name if nothing needs it"
done <<<"$listing"
log "no other container on docker network $network has $WORKER_ADDRESS, worker $WORKER's address"
