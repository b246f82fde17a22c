{{/* Base name of every object: the release name, with the chart name unless
it already holds it ("plait" -> plait-api, "exports" -> exports-plait-api). */}}
{{- define "plait.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "plait.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "plait.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "plait.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "plait.secretName" -}}
{{- .Values.secret.existingSecret | default (printf "%s-secret" (include "plait.fullname" .)) -}}
{{- end -}}

{{/* Every container of Plait reads the same PLAIT_* settings. */}}
{{- define "plait.envFrom" -}}
- configMapRef:
    name: {{ include "plait.fullname" . }}-settings
- secretRef:
    name: {{ include "plait.secretName" . }}
{{- end -}}
