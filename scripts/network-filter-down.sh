#!/usr/bin/env bash
# Takes the lab's network filter away (its destroy step): network-filter.sh with FILTER_ACTION=remove,
# which removes the chains named from LAB_IDENTITY and the jumps to them, and nothing else.
#
# env:    as network-filter.sh (LAB_IDENTITY and NODE_IMAGE are the ones it reads)
# stdout: nothing
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env LAB_IDENTITY NODE_IMAGE
FILTER_ACTION=remove exec bash "$(dirname "${BASH_SOURCE[0]}")/network-filter.sh"
