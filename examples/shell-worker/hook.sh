#!/bin/sh
# The ConfigSet controller's sync hook, run by `uc worker` once per request:
# Metacontroller's request on stdin, the reply on stdout.
#
# A ConfigSet lists named groups of settings, spec.configMaps: {NAME: {KEY:
# VALUE}}. Each becomes the ConfigMap <configset>-NAME; one removed from the
# list is deleted. The status counts the ConfigMaps that exist.
exec jq -c '.parent as $set | {
  children: [$set.spec.configMaps // {} | to_entries[] | {
    apiVersion: "v1", kind: "ConfigMap",
    metadata: {name: "\($set.metadata.name)-\(.key)"},
    data: .value
  }],
  status: {configMaps: (.children["ConfigMap.v1"] | length)}
}'
