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
source hack/lib.sh

up "${DEMO_DIR:-$root/.demo}" "${NATS_PORT:-0}"
step "installing the Foo CRD"
k apply -f examples/foo/crd.yaml
k wait --for condition=established --timeout=60s crd/foos.samplecontroller.k8s.io

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
