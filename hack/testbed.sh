#!/usr/bin/env bash
# make testbed: brings up the local test bed and uc run (every role, embedded
# NATS JetStream storing to files) for trying a hook of your own, and writes
# the variables that point kubectl, uc worker and hook workers at them to
# .testbed/env (source it in another shell). Ctrl-C tears everything down.
#
#   UC_BIN        the uc to run (default: bin/uc, which make testbed builds),
#                 e.g. a released binary; it is uc on the PATH of .testbed/env
#   TESTBED_DIR   work directory (default: .testbed)
#   NATS_PORT     port of uc's embedded NATS server (default: a free port,
#                 so it runs beside another test bed or a NATS server)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source hack/lib.sh

up "${TESTBED_DIR:-$root/.testbed}" "${NATS_PORT:-0}"
# uc on the PATH is the one that runs.
mkdir -p "$work/bin"
ln -sf "$(cd "$(dirname "$uc")" && pwd)/$(basename "$uc")" "$work/bin/uc"
cat >"$work/env" <<VARS
export KUBECONFIG=$KUBECONFIG
export NATS_URL=$nats_url UC_NATS_URL=$nats_url
export PATH=$work/bin:$root/bin:$cache/bin:\$PATH
VARS

cat <<TXT

==> ready: a Kubernetes API server with a kwok node, and uc on it.
    In another shell:

    source $work/env    # KUBECONFIG; NATS_URL for SDK workers, UC_NATS_URL for uc worker; uc and kubectl on PATH
    kubectl get nodes
    uc init Greeting                      # a CRD, its controller and a Python hook to start from

    Logs: $work/uc.log, $work/testbed.log. Press Ctrl-C to tear everything down.
TXT
wait "$bed"
