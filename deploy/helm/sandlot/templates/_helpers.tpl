{{/* Names, labels and the values the daemon's config and the objects share. */}}

{{- define "sandlot.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sandlot.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The daemon pods' selector: also what the provider's NetworkPolicies name as sandlot's own pods. */}}
{{- define "sandlot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sandlot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sandlot.labels" -}}
{{ include "sandlot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "sandlot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sandlot.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Where the sandboxes' objects live. */}}
{{- define "sandlot.sandboxNamespace" -}}
{{- default .Release.Namespace .Values.kubernetes.namespace -}}
{{- end -}}

{{- define "sandlot.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "sandlot.egressProxy" -}}
{{- if .Values.network.egressProxy.address -}}
{{- .Values.network.egressProxy.address -}}
{{- else -}}
{{- printf "%s.%s.svc:%d" (include "sandlot.fullname" .) .Release.Namespace (int .Values.network.egressProxy.port) -}}
{{- end -}}
{{- end -}}

{{- define "sandlot.postgresSecret" -}}
{{- default (printf "%s-postgres" (include "sandlot.fullname" .)) .Values.postgres.existingSecret -}}
{{- end -}}

{{- define "sandlot.e2bSecret" -}}
{{- default (printf "%s-e2b" (include "sandlot.fullname" .)) .Values.e2b.tokenSecret.existingSecret -}}
{{- end -}}

{{- define "sandlot.secretsKeySecret" -}}
{{- default (printf "%s-secrets-key" (include "sandlot.fullname" .)) .Values.secretsKey.existingSecret -}}
{{- end -}}

{{/*
The daemon's config file (docs/configuration.md: keys are serve's flag
names). Built as a dict and written with toYaml, so no value can add keys
of its own. config: keys come last and win.
*/}}
{{- define "sandlot.config" -}}
{{- $runtimeClass := .Values.kubernetes.runtimeClass | default "none" -}}
{{- if not (has $runtimeClass (list "gvisor" "kata" "none")) -}}
{{- fail (printf "kubernetes.runtimeClass %q: want gvisor, kata or none" $runtimeClass) -}}
{{- end -}}
{{- $cfg := dict
  "addr" (printf "0.0.0.0:%d" (int .Values.service.port))
  "data-dir" "/var/lib/sandlot"
  "state-dir" "/run/sandlot"
  "default-image" "none"
  "providers" "kubernetes"
  "kube-namespace" (include "sandlot.sandboxNamespace" .)
  "kube-runtime-class" $runtimeClass
  "kube-egress-proxy" (include "sandlot.egressProxy" .)
  "kube-egress-listen" (printf "0.0.0.0:%d" (int .Values.network.egressProxy.port))
-}}
{{- with .Values.kubernetes.imageRegistry }}{{ $_ := set $cfg "kube-registry" . }}{{ end -}}
{{- with .Values.kubernetes.pools }}{{ $_ := set $cfg "pool-sizes" . }}{{ end -}}
{{- with .Values.ports.domain }}{{ $_ := set $cfg "ports-domain" . }}{{ end -}}
{{- if .Values.ports.tls.enabled -}}
{{- $_ := required "ports.tls.secretName is required with ports.tls.enabled" .Values.ports.tls.secretName -}}
{{- $_ := set $cfg "tls-addr" "0.0.0.0:7443" -}}
{{- $_ := set $cfg "tls-cert" "/etc/sandlot/tls/tls.crt" -}}
{{- $_ := set $cfg "tls-key" "/etc/sandlot/tls/tls.key" -}}
{{- end -}}
{{- toYaml (mergeOverwrite $cfg (deepCopy .Values.config)) -}}
{{- end -}}
