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
