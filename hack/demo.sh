#!/usr/bin/env bash
# make demo: brings up the local test bed, uc run (every role, embedded NATS
# JetStream storing to files) and the Foo example's hook worker; registers the
# Foo controller, creates a Foo and shows its Deployment, its Ready pods and
# the Foo's status. Ctrl-C tears everything down.
#
#   DEMO_ONESHOT=1   run through, check, tear down and exit (used by CI)
#   DEMO_DIR         work directory (default: .demo)
#   NATS_PORT        port of uc's embedded NATS server (default: a free port,
#                    so the demo runs beside another demo or a NATS server)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache=$(./hack/testbed-bins.sh)
kubectl="$cache/bin/kubectl"
work=${DEMO_DIR:-$root/.demo}
port=${NATS_PORT:-0}
rm -rf "$work"
mkdir -p "$work"

pids=()
cleanup() {
	trap - EXIT INT TERM
	echo
	echo "==> tearing down"
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "    stopped uc, the hook worker and the test bed; logs are in $work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n==> %s\n' "$*"; }
# until DESC SECONDS CMD…: runs CMD until it succeeds, for at most SECONDS.
until_ok() {
	local what=$1 deadline=$((SECONDS + $2))
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then
			echo "timed out waiting for $what" >&2
			return 1
		fi
		sleep 0.5
	done
}
alive() { kill -0 "$1" 2>/dev/null; }
k() { "$kubectl" "$@"; }

step "starting the test bed: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok"
bin/uc-testbed up --dir "$work/testbed" >"$work/testbed.log" 2>&1 &
pids+=($!)
bed=$!
until_ok "the test bed (see $work/testbed.log)" 300 bash -c "[ -s '$work/testbed/kubeconfig' ] && $kubectl --kubeconfig '$work/testbed/kubeconfig' get node -o name | grep -q ." ||
	{ tail -20 "$work/testbed.log"; exit 1; }
alive "$bed"
export KUBECONFIG=$work/testbed/kubeconfig

step "installing the CRDs"
k apply -f schemas/crds/ -f examples/foo/crd.yaml
k wait --for condition=established --timeout=60s crd/universalcontrollers.universalcontroller.dev crd/foos.samplecontroller.k8s.io

step "starting uc run (embedded NATS JetStream, data in $work/uc-data)"
bin/uc run --kubeconfig "$KUBECONFIG" --nats-listen "127.0.0.1:$port" --data-dir "$work/uc-data" --metrics-addr 127.0.0.1:0 >"$work/uc.log" 2>&1 &
pids+=($!)
until_ok "uc (see $work/uc.log)" 60 grep -q "uc started" "$work/uc.log" || { tail -20 "$work/uc.log"; exit 1; }
# The address the embedded server took, from its log line.
nats_url=$(sed -n 's/.*msg="embedded NATS JetStream started" url=\([^ ]*\).*/\1/p' "$work/uc.log")
echo "    hook workers connect to $nats_url"
until_ok "uc's metrics" 10 grep -q "flag=--metrics-addr" "$work/uc.log"
metrics_addr=$(sed -n 's/.*msg=serving flag=--metrics-addr addr=\([^ ]*\).*/\1/p' "$work/uc.log")
echo "    its metrics: http://$metrics_addr/metrics"

step "starting the Foo hook worker (examples/foo, a bus-native Go worker)"
bin/foo-hook --nats-url "$nats_url" >"$work/foo-hook.log" 2>&1 &
pids+=($!)

step "registering the Foo controller and creating a Foo"
k apply -f examples/foo/controller.yaml
k apply -f examples/foo/foo.yaml

step "the Foo's Deployment is created"
until_ok "the Deployment" 60 "$kubectl" get deployment example-foo
k get deployment example-foo -o wide

step "its pods become Ready (kwok plays the node)"
k rollout status deployment/example-foo --timeout=120s
k get pods -l controller=example-foo -o wide

step "the Foo's status is filled in"
until_ok "status.availableReplicas" 60 bash -c "[ \"\$($kubectl get foo example-foo -o jsonpath='{.status.availableReplicas}')\" = 2 ]"
k get foo example-foo -o jsonpath='{.status}{"\n"}'
k get foo example-foo

if [ -n "${DEMO_ONESHOT:-}" ]; then
	step "scaling the Foo to 3"
	k patch foo example-foo --type merge -p '{"spec":{"replicas":3}}'
	until_ok "3 available replicas" 120 bash -c "[ \"\$($kubectl get foo example-foo -o jsonpath='{.status.availableReplicas}')\" = 3 ]"
	k get foo example-foo
	echo "demo passed"
	exit 0
fi

cat <<TXT

==> ready. Poke at it with:
    export KUBECONFIG=$KUBECONFIG
    $kubectl get foos,deployments,pods
    $kubectl patch foo example-foo --type merge -p '{"spec":{"replicas":3}}'
    $kubectl scale deployment example-foo --replicas=5     # uc puts it back
    $kubectl delete foo example-foo                         # the Deployment goes too
    tail -f $work/uc.log $work/foo-hook.log

Press Ctrl-C to tear everything down.
TXT
wait "$bed"
