#!/usr/bin/env bash
# Prints where the lab's Grafana dashboard is and how to read its admin password (make dashboard).
#
# env:    STACK  the Pulumi stack
# stdout: the dashboard's URL, user and the command that prints the password (never the password)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_env STACK
url=$(pulumi stack output grafanaUrl --stack "$STACK" 2>/dev/null) || url=""
[[ -n $url ]] || die "stack $STACK has no dashboard (no grafanaUrl output): turn it on with" \
	"'pulumi config set observability true --stack $STACK', then run make up"
printf 'Grafana:  %s/d/kamaji-hami-lab-tenants (user admin)\n' "$url"
printf 'Password: pulumi stack output --show-secrets grafanaAdminPassword --stack %s\n' "$STACK"
