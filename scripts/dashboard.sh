#!/usr/bin/env bash
# Prints where the lab's Grafana dashboard is and how to read its admin password (make dashboard). With a
# provided LoadBalancer Grafana has no address of its own (plain HTTP is not put on an address the lab does not
# control): its URL is on this host's loopback, and this script forwards it there until Ctrl-C.
#
# env:    STACK  the Pulumi stack
# stdout: the dashboard's URL, user and the command that prints the password (never the password)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The chart's ClusterIP Service: <release> (it contains the chart's name) on service.port
# (grafana-community/helm-charts charts/grafana/templates/_helpers.tpl, service.yaml@grafana-12.11.1).
GRAFANA_SERVICE=lab-grafana
GRAFANA_NAMESPACE=lab-monitoring
GRAFANA_PORT=80
LOOPBACK=127.0.0.1

require_env STACK
url=$(pulumi stack output grafanaUrl --stack "$STACK" 2>/dev/null) || url=""
[[ -n $url ]] || die "stack $STACK has no dashboard (no grafanaUrl output): turn it on with" \
	"'pulumi config set observability true --stack $STACK', then run make up"
printf 'Grafana:  %s/d/kamaji-hami-lab-tenants (user admin)\n' "$url"
printf 'Password: pulumi stack output --show-secrets grafanaAdminPassword --stack %s\n' "$STACK"
[[ $url == "http://$LOOPBACK:"* ]] || exit 0

# Read only now, and kept in a scratch file removed on exit.
# shellcheck disable=SC2034  # kubeconfig_file reads it by name
management=$(pulumi stack output --show-secrets managementKubeconfig --stack "$STACK") ||
	die "stack $STACK has no managementKubeconfig output: run make up"
kubeconfig_file management
printf 'Forwarding it from the management cluster until Ctrl-C.\n'
# In the foreground, not exec: the exit hook removes the kubeconfig when kubectl ends.
kubectl port-forward --address "$LOOPBACK" --namespace "$GRAFANA_NAMESPACE" "service/$GRAFANA_SERVICE" \
	"${url##*:}:$GRAFANA_PORT"
