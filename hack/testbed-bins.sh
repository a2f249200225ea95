#!/usr/bin/env bash
# Builds the test bed's binaries once and caches them outside the repository:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (k8s.io/kubernetes
# v1.34.4), etcd 3.6, kwok v0.8.0 with its stage configs, and nats-server.
# A binary already in the cache is not rebuilt. Prints the cache directory.
#
# The first time takes minutes: the builds run at once (the four Kubernetes
# commands in one go build, which shares their packages and links them side
# by side), and a line every minute says which are still going.
#
#   UC_TESTBED_DIR   cache directory (default: $HOME/.cache/uc-testbed)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${UC_TESTBED_DIR:-$HOME/.cache/uc-testbed}
bin=$cache/bin
mkdir -p "$bin" "$cache/stages"

KWOK_VERSION=v0.8.0
NATS_SERVER_VERSION=v2.15.2

log() { printf 'testbed-bins [%dm%02ds]: %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

# missing NAME...: the names with no executable in the cache.
missing() {
	local n
	for n in "$@"; do [ -x "$bin/$n" ] || echo "$n"; done
}

# build_kube NAME...: the Kubernetes commands, in one go build into a
# scratch directory, moved into the cache once all are built.
build_kube() {
	local tmp pkgs=() n
	tmp=$(mktemp -d "$bin/.kube.XXXXXX")
	for n in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$n"); done
	(cd "$here/tools/kube" && CGO_ENABLED=0 go build -trimpath -o "$tmp/" "${pkgs[@]}")
	for n in "$@"; do mv "$tmp/$n" "$bin/$n"; done
	rmdir "$tmp"
}

build_etcd() {
	(cd "$here/tools/etcd" && CGO_ENABLED=0 go build -trimpath -o "$bin/etcd.tmp" .)
	mv "$bin/etcd.tmp" "$bin/etcd"
}

# go_install NAME MODULE@VERSION: go install into a scratch GOBIN, then the
# cache, so that an interrupted build leaves no half-written binary.
go_install() {
	local tmp
	tmp=$(mktemp -d "$bin/.$1.XXXXXX")
	GOBIN=$tmp CGO_ENABLED=0 go install "$2"
	mv "$tmp/$1" "$bin/$1"
	rmdir "$tmp"
}

pids=() names=()
start() { # start WHAT CMD...: runs CMD in the background
	log "building $1 (first time only)"
	"${@:2}" &
	pids+=($!) names+=("$1")
}

mapfile -t kube < <(missing kube-apiserver kube-controller-manager kube-scheduler kubectl)
[ ${#kube[@]} -eq 0 ] || start "${kube[*]}" build_kube "${kube[@]}"
[ -x "$bin/etcd" ] || start etcd build_etcd
[ -x "$bin/kwok" ] || start "kwok $KWOK_VERSION" go_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
[ -x "$bin/nats-server" ] || start "nats-server $NATS_SERVER_VERSION" \
	go_install nats-server "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"

if [ ${#pids[@]} -gt 0 ]; then
	# A line a minute while anything builds, so a first run does not look hung.
	# It writes to stderr only: the callers read the cache's path from stdout.
	(while sleep 60; do log "still building…"; done) >&2 &
	ticker=$!
	trap 'kill "$ticker" 2>/dev/null || true' EXIT
	# Each says it is done as it ends.
	declare -A name
	for i in "${!pids[@]}"; do name[${pids[i]}]=${names[i]}; done
	failed=() left=("${pids[@]}")
	while [ ${#left[@]} -gt 0 ]; do
		if wait -n -p done "${left[@]}"; then
			log "built ${name[$done]}"
		else
			failed+=("${name[$done]}")
		fi
		# Waiting again for a job already reaped is an error ("no such job").
		rest=()
		for p in "${left[@]}"; do [ "$p" = "$done" ] || rest+=("$p"); done
		left=("${rest[@]}")
	done
	if [ ${#failed[@]} -gt 0 ]; then
		log "failed to build: ${failed[*]}"
		exit 1
	fi
fi

stages=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
if [ ! -f "$cache/stages/pod-ready.yaml" ]; then
	[ -d "$stages" ] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
	cp "$stages/node/fast/node-initialize.yaml" "$stages/node/heartbeat/node-heartbeat.yaml" \
		"$stages/pod/fast/pod-ready.yaml" "$stages/pod/fast/pod-complete.yaml" \
		"$stages/pod/fast/pod-delete.yaml" "$cache/stages/"
	chmod u+w "$cache/stages/"*.yaml
fi

echo "$cache"
