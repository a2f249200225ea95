#!/bin/sh
# The test of the {{.Kind}} controller's sync hook: it runs hook.sh as uc worker
# does, on request.json (the request uc would send about {{.Lower}}.yaml), and
# checks the reply. Run it:  sh hook_test.sh
set -eu
here=$(dirname "$0")
reply=$(sh "$here/hook.sh" < "$here/request.json")
want='{"status":{"configMaps":0},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"{{.Parent}}"},"data":{"message":"{{.Message}}"}}]}'
if ! printf '%s' "$reply" | jq -e --argjson want "$want" '. == $want' >/dev/null; then
	echo "FAIL: the reply to request.json is $reply, want $want" >&2
	exit 1
fi
echo "ok: the reply to request.json"
