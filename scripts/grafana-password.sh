#!/usr/bin/env bash
# Makes Grafana's admin password once: Pulumi keeps it, secret, in state and in the stack outputs.
#
# env:    none
# stdout: 32 random URL-safe characters (secret)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

password=$(openssl rand -base64 48) || die "openssl rand failed"
password=${password//[^A-Za-z0-9]/}
((${#password} >= 32)) || die "openssl rand gave too little randomness"
printf '%s\n' "${password:0:32}"
