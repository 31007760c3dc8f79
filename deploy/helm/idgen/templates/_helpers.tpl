{{/* Names, labels and the few decisions several templates share. */}}

{{- define "idgen.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-idgen, or the release name when it already contains the
chart's name; short enough for a "-snowflake" suffix within 63. */}}
{{- define "idgen.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 53 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 53 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 53 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The modes to deploy, one Deployment and one Service each. */}}
{{- define "idgen.modes" -}}
{{- if eq .Values.mode "both" -}}
segment snowflake
{{- else -}}
{{- .Values.mode -}}
{{- end -}}
{{- end -}}

{{- define "idgen.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idgen.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "idgen.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "idgen.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels of one mode's objects; call with (dict "root" $ "mode" $mode). */}}
{{- define "idgen.modeSelectorLabels" -}}
{{ include "idgen.selectorLabels" .root }}
app.kubernetes.io/component: {{ .mode }}
{{- end -}}

{{- define "idgen.modeLabels" -}}
{{ include "idgen.labels" .root }}
app.kubernetes.io/component: {{ .mode }}
{{- end -}}

{{- define "idgen.storeSecretName" -}}
{{- .Values.store.existingSecret | default (printf "%s-store" (include "idgen.fullname" .)) -}}
{{- end -}}

{{- define "idgen.storeSecretKey" -}}
{{- if .Values.store.existingSecret -}}{{ .Values.store.existingSecretKey }}{{- else -}}store-dsn{{- end -}}
{{- end -}}

{{- define "idgen.authSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "idgen.fullname" .)) -}}
{{- end -}}

{{/* Whether any token is in use, so that a Secret is needed. */}}
{{- define "idgen.authEnabled" -}}
{{- if or .Values.auth.adminToken.enabled .Values.auth.apiTokens.enabled .Values.auth.metricsToken.enabled -}}true{{- end -}}
{{- end -}}

{{- define "idgen.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "idgen.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "idgen.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}
{{- end -}}

{{- define "idgen.scheme" -}}
{{- if .Values.tls.enabled -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{- define "idgen.clientCASecret" -}}
{{- .Values.tls.clientCA.secretName | default .Values.tls.secretName -}}
{{- end -}}

{{/* A base64 token: the one under .key in .old (the Secret's data in the
cluster), or a new random one. */}}
{{- define "idgen.token" -}}
{{- index .old .key | default (randAlphaNum 40 | b64enc) -}}
{{- end -}}

{{/* The checks the schema cannot word: each fails with one line that
says what to set. Under `helm lint` fail only notes its message, so the
chart's defaults, which name no database, lint. */}}
{{- define "idgen.validate" -}}
{{- $v := .Values -}}
{{- if not (or $v.store.dsn $v.store.existingSecret) -}}
{{- fail "no database: set store.dsn (postgres://USER:PASSWORD@HOST:5432/DB or mysql://…, kept in a Secret the chart makes) or store.existingSecret (the name of a Secret of yours holding the DSN under store.existingSecretKey)" -}}
{{- end -}}
{{- if and (lt (int $v.replicaCount) 2) (not $v.allowSingleReplica) -}}
{{- fail "replicaCount is 1: a node drain or a crash of that one pod stops every request until a new one is ready, and no other pod's buffers ride a database outage through; set replicaCount to 2 or more, or allowSingleReplica: true to accept it (a test cluster)" -}}
{{- end -}}
{{- if $v.service.headless.enabled -}}
{{- $longest := "" -}}
{{- range $mode := splitList " " (include "idgen.modes" $) -}}
{{- $name := include "idgen.headlessName" (dict "root" $ "mode" $mode) -}}
{{- if gt (len $name) (len $longest) }}{{ $longest = $name }}{{ end -}}
{{- end -}}
{{- if gt (len $longest) 63 -}}
{{- $fullname := include "idgen.fullname" $ -}}
{{- fail (printf "service.headless: the Service name %s is %d characters, more than the 63 of a DNS label; the names' prefix %s must be at most %d characters for it (it is %d): set a shorter fullnameOverride or release name" $longest (len $longest) $fullname (sub 63 (sub (len $longest) (len $fullname))) (len $fullname)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service of a mode; call with (dict "root" $ "mode" $mode). */}}
{{- define "idgen.headlessName" -}}
{{- printf "%s-%s-headless" (include "idgen.fullname" .root) .mode -}}
{{- end -}}

{{/* A checksum of the keys .keys of the Secret .name as it is in the
cluster, so that pods roll when the content of a Secret the chart does
not manage changes. lookup answers nothing under `helm template` and
--dry-run: the checksum is then that of an empty Secret. Only the keys
idgen reads count, so that another key's change rolls nothing. The
Secret's uid, which only those who may read the Secret see, salts it:
anyone who may read pods sees the annotation, and an unsalted hash of a
DSN would let them try passwords offline. A Secret deleted and made
again has a new uid, and rolls the pods once. */}}
{{- define "idgen.secretChecksum" -}}
{{- $secret := lookup "v1" "Secret" .root.Release.Namespace .name -}}
{{- $data := dig "data" (dict) $secret -}}
{{- $picked := dict -}}
{{- range .keys -}}
{{- $_ := set $picked . (index $data . | default "") -}}
{{- end -}}
{{- printf "%s\n%s" (dig "metadata" "uid" "" $secret) (toJson $picked) | sha256sum -}}
{{- end -}}
