# Sourced by demo.sh and testbed.sh: brings up the local test bed and uc run
# (every role, embedded NATS JetStream storing to files) and tears them down
# on exit. The sourcing script sets root (the repository) and cd's there.

cache=$(./hack/testbed-bins.sh)
kubectl="$cache/bin/kubectl"
# uc: the one make builds, or UC_BIN (a released binary).
uc=${UC_BIN:-bin/uc}

pids=()
cleanup() {
	trap - EXIT INT TERM
	echo
	echo "==> tearing down"
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "    stopped uc, the test bed and what ran with them; logs are in $work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n==> %s\n' "$*"; }
# until_ok DESC SECONDS CMD…: runs CMD until it succeeds, for at most SECONDS.
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

# up WORK PORT: starts the test bed in WORK/testbed, installs uc's CRDs and
# starts uc run with its embedded NATS on 127.0.0.1:PORT (0: a free port)
# and its data in WORK/uc-data. It exports KUBECONFIG, sets bed to the test
# bed's pid and nats_url to where hook workers connect.
up() {
	work=$1
	local port=$2
	rm -rf "$work"
	mkdir -p "$work"

	step "starting the test bed: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok"
	bin/uc-testbed up --dir "$work/testbed" >"$work/testbed.log" 2>&1 &
	pids+=($!)
	bed=$!
	until_ok "the test bed (see $work/testbed.log)" 300 bash -c "[ -s '$work/testbed/kubeconfig' ] && $kubectl --kubeconfig '$work/testbed/kubeconfig' get node -o name | grep -q ." ||
		{ tail -20 "$work/testbed.log"; exit 1; }
	alive "$bed"
	export KUBECONFIG=$work/testbed/kubeconfig

	step "installing uc's CRDs"
	k apply -f schemas/crds/
	k wait --for condition=established --timeout=60s crd/universalcontrollers.universalcontroller.dev

	step "starting uc run (embedded NATS JetStream, data in $work/uc-data)"
	"$uc" run --kubeconfig "$KUBECONFIG" --nats-listen "127.0.0.1:$port" --data-dir "$work/uc-data" --metrics-addr 127.0.0.1:0 >"$work/uc.log" 2>&1 &
	pids+=($!)
	until_ok "uc (see $work/uc.log)" 60 grep -q "uc started" "$work/uc.log" || { tail -20 "$work/uc.log"; exit 1; }
	# The address the embedded server took, from its log line.
	nats_url=$(sed -n 's/.*msg="embedded NATS JetStream started" url=\([^ ]*\).*/\1/p' "$work/uc.log")
	echo "    hook workers connect to $nats_url"
	until_ok "uc's metrics" 10 grep -q "flag=--metrics-addr" "$work/uc.log"
	metrics_addr=$(sed -n 's/.*msg=serving flag=--metrics-addr addr=\([^ ]*\).*/\1/p' "$work/uc.log")
	echo "    its metrics: http://$metrics_addr/metrics"
}
