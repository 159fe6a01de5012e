#!/usr/bin/env bash
# Prints a random identity for this stack's lab. pulumi-command runs it once, when the
# resource is created; its stdout then stays in the stack's state, unchanged by later
# `pulumi up`s. Every machine this lab joins carries it in its mark (join-worker.sh), so
# two stacks with the same project, stack and cluster names never take each other's machines.
#
# env:    none
# stdout: 32 hex digits (128 random bits)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

identity=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
[[ $identity =~ ^[0-9a-f]{32}$ ]] || die "could not read 16 random bytes from /dev/urandom"
printf '%s\n' "$identity"
