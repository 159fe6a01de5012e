#!/usr/bin/env bash
# Takes the lab's network filter away (its destroy step): network-filter.sh with FILTER_ACTION=remove,
# which removes the chains named from LAB_IDENTITY and the jumps to them, and nothing else.
#
# env:    as network-filter.sh (LAB_IDENTITY and NODE_IMAGE are the ones it reads)
# stdout: nothing
set -euo pipefail
FILTER_ACTION=remove exec bash "$(dirname "${BASH_SOURCE[0]}")/network-filter.sh"
