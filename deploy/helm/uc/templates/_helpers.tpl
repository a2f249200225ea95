{{/*
The chart's name, in the label app.kubernetes.io/name of uc's roles and in
the prefix of names: "uc", or nameOverride.
*/}}
{{- define "uc.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object's name: fullnameOverride, or the release's name
with the chart's (uc.name) appended unless it holds it already ("uc" gives
uc-watcher, uc-nats, …). At most 40 characters, so that the names made
from it fit Kubernetes' limits (the Service <fullname>-nats-headless, 63).
*/}}
{{- define "uc.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "uc.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The namespace of every namespaced object: the release's, or namespaceOverride. */}}
{{- define "uc.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "uc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: universalcontroller
{{- end -}}

{{/*
The labels selecting one component's Pods: (dict "root" $ "name" "uc"
"component" "watcher").
*/}}
{{- define "uc.selectorLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* The name of the ClusterRole and Deployment of a role: (list $ "watcher"). */}}
{{- define "uc.roleName" -}}
{{- printf "%s-%s" (include "uc.fullname" (index . 0)) (index . 1) -}}
{{- end -}}

{{/*
The ServiceAccount a role runs as: (list $ "watcher"). <prefix>-<role>, the
prefix serviceAccount.name or the fullname: each role has its own, bound to
its own ClusterRole.
*/}}
{{- define "uc.serviceAccountName" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%s" ($root.Values.serviceAccount.name | default (include "uc.fullname" $root)) (index . 1) -}}
{{- end -}}

{{/* The name of the NATS StatefulSet and its client Service. */}}
{{- define "uc.natsName" -}}
{{- printf "%s-nats" (include "uc.fullname" .) -}}
{{- end -}}

{{- define "uc.natsURL" -}}
{{- .Values.nats.url | default (printf "nats://%s:4222" (include "uc.natsName" .)) -}}
{{- end -}}

{{/* The Secret of the NATS users' passwords. */}}
{{- define "uc.passwordsSecret" -}}
{{- .Values.nats.auth.existingSecret | default (printf "%s-nats-passwords" (include "uc.fullname" .)) -}}
{{- end -}}

{{/*
The Secret of the password the NATS servers route to each other with, under
the key UC_NATS_ROUTE_PASSWORD.
*/}}
{{- define "uc.routesSecret" -}}
{{- .Values.nats.server.routeAuth.existingSecret | default (printf "%s-nats-routes" (include "uc.fullname" .)) -}}
{{- end -}}

{{/*
The variable holding a NATS user's password: UC_NATS_PASSWORD_ and the
user's name in upper case, every other character "_" (as `uc nats-config`
writes it).
*/}}
{{- define "uc.passwordVariable" -}}
{{- printf "UC_NATS_PASSWORD_%s" (regexReplaceAll "[^A-Za-z0-9]" . "_" | upper) -}}
{{- end -}}

{{/* The NATS users' configuration, auth.conf. */}}
{{- define "uc.authConf" -}}
{{- if .Values.nats.auth.conf -}}
{{- .Values.nats.auth.conf -}}
{{- else if ne (int .Values.partitions) 32 -}}
{{- fail "partitions differs from 32, the partitions of the default NATS users: set nats.auth.conf to `uc nats-config --partitions N`" -}}
{{- else -}}
{{- .Files.Get "files/auth.conf" -}}
{{- end -}}
{{- end -}}

{{- define "uc.leaseName" -}}
{{- .Values.watcher.leaseName | default (include "uc.roleName" (list . "watcher")) -}}
{{- end -}}

{{- define "uc.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
The labels of a role's or the NATS servers' Pods: podLabels, the
component's own podLabels over them, and its selector labels over both:
(dict "root" $ "own" <the component's values> "selector" <its selector
labels>).
*/}}
{{- define "uc.podLabels" -}}
{{- toYaml (merge (fromYaml .selector) (.own.podLabels | default dict) (.root.Values.podLabels | default dict)) -}}
{{- end -}}

{{/*
Where a role's or the NATS servers' Pods run, at the level of the Pod's
spec: (dict "root" $ "own" <the component's values> "selector" <its
selector labels> "spread" <spread over the nodes by default>). The
component's own priorityClassName, nodeSelector, tolerations and affinity
replace the top-level ones. Its topologySpreadConstraints replace the
default spread over the nodes; one without a labelSelector gets the
component's selector.
*/}}
{{- define "uc.podPlacement" -}}
{{- $root := .root -}}
{{- $own := .own -}}
{{- with $own.priorityClassName | default $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if $own.topologySpreadConstraints }}
{{- $constraints := list }}
{{- range $own.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not $c.labelSelector }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (fromYaml $.selector)) }}
{{- end }}
{{- $constraints = append $constraints $c }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- else if .spread }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- .selector | nindent 8 }}
{{- end }}
{{- with $own.nodeSelector | default $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $own.tolerations | default $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $own.affinity | default $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The PodDisruptionBudget of a role or of the NATS servers, with more than
one replica: (dict "root" $ "name" <its name> "key" <its values' path, for
errors> "own" <its values> "replicas" <its replicas> "selector" <its
selector labels> "default" <the spec without minAvailable nor
maxUnavailable>).
*/}}
{{- define "uc.podDisruptionBudget" -}}
{{- $pdb := .own.podDisruptionBudget -}}
{{- if and $pdb.enabled (gt (int .replicas) 1) -}}
{{- $min := ternary "" (toString $pdb.minAvailable) (kindIs "invalid" $pdb.minAvailable) -}}
{{- $max := ternary "" (toString $pdb.maxUnavailable) (kindIs "invalid" $pdb.maxUnavailable) -}}
{{- if and $min $max -}}
{{- fail (printf "%s.podDisruptionBudget: give minAvailable or maxUnavailable, not both" .key) -}}
{{- end }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ include "uc.namespace" .root }}
  labels:
    {{- include "uc.labels" .root | nindent 4 }}
spec:
  {{- if $min }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else if $max }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- else }}
  {{- toYaml .default | nindent 2 }}
  {{- end }}
  selector:
    matchLabels:
      {{- .selector | nindent 6 }}
{{- end }}
{{- end -}}

{{/*
The Secret of the chart's NATS servers' certificate (ca.crt, tls.crt,
tls.key): nats.server.tls.existingSecret, or <fullname>-nats-tls, which
cert-manager or the chart makes (nats-tls.yaml).
*/}}
{{- define "uc.natsTLSSecret" -}}
{{- .Values.nats.server.tls.existingSecret | default (printf "%s-nats-tls" (include "uc.fullname" .)) -}}
{{- end -}}

{{/*
The names the chart's NATS servers answer to: the client Service and any
server under the headless Service, short and qualified (as uc nats-certs
makes them).
*/}}
{{- define "uc.natsDNSNames" -}}
{{- $name := include "uc.natsName" . -}}
{{- $ns := include "uc.namespace" . -}}
{{- $domain := .Values.nats.server.tls.clusterDomain -}}
{{- $names := list -}}
{{- range $host := list $name (printf "*.%s-headless" $name) -}}
{{- $names = concat $names (list $host (printf "%s.%s" $host $ns) (printf "%s.%s.svc" $host $ns) (printf "%s.%s.svc.%s" $host $ns $domain)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/*
Whether cert-manager issues the NATS servers' certificate:
nats.server.tls.source cert-manager, or auto and its API is installed.
*/}}
{{- define "uc.natsCertManager" -}}
{{- $source := .Values.nats.server.tls.source -}}
{{- if or (eq $source "cert-manager") (and (eq $source "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1")) -}}
true
{{- end -}}
{{- end -}}
