#!/usr/bin/env bash
# Builds the test bed's binaries once and caches them outside the repository:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (k8s.io/kubernetes
# v1.34.4), etcd 3.6, kwok v0.8.0 with its stage configs, and nats-server.
# A binary already in the cache is not rebuilt. Prints the cache directory.
#
#   UC_TESTBED_DIR   cache directory (default: $HOME/.cache/uc-testbed)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${UC_TESTBED_DIR:-$HOME/.cache/uc-testbed}
bin=$cache/bin
mkdir -p "$bin" "$cache/stages"

KWOK_VERSION=v0.8.0
NATS_SERVER_VERSION=v2.15.2

log() { echo "testbed-bins: $*" >&2; }

build_in() { # build_in DIR OUT PKG
	local dir=$1 out=$2 pkg=$3
	[ -x "$bin/$out" ] && return 0
	log "building $out (first time only)"
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -o "$bin/$out.tmp" "$pkg") && mv "$bin/$out.tmp" "$bin/$out"
}

build_in "$here/tools/etcd" etcd . &
etcd_pid=$!
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	build_in "$here/tools/kube" "$c" "k8s.io/kubernetes/cmd/$c"
done
wait "$etcd_pid"

if [ ! -x "$bin/kwok" ]; then
	log "building kwok $KWOK_VERSION"
	GOBIN=$bin CGO_ENABLED=0 go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi
stages=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
if [ ! -f "$cache/stages/pod-ready.yaml" ]; then
	[ -d "$stages" ] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
	cp "$stages/node/fast/node-initialize.yaml" "$stages/node/heartbeat/node-heartbeat.yaml" \
		"$stages/pod/fast/pod-ready.yaml" "$stages/pod/fast/pod-complete.yaml" \
		"$stages/pod/fast/pod-delete.yaml" "$cache/stages/"
	chmod u+w "$cache/stages/"*.yaml
fi

if [ ! -x "$bin/nats-server" ]; then
	log "building nats-server $NATS_SERVER_VERSION"
	GOBIN=$bin CGO_ENABLED=0 go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
fi

echo "$cache"
