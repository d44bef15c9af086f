{{/* The chart's name. */}}
{{- define "codegym.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: RELEASE-codegym unless the release name already says codegym. */}}
{{- define "codegym.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every resource; call with (dict "root" $ "component" "sandbox"). */}}
{{- define "codegym.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{ include "codegym.selectorLabels" . }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select one component's pods. */}}
{{- define "codegym.selectorLabels" -}}
app.kubernetes.io/name: {{ include "codegym.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* An image reference; call with (dict "root" $ "image" .Values.sandbox.image). */}}
{{- define "codegym.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) }}
{{- end }}

{{/* The sandbox Service's URL inside the cluster. */}}
{{- define "codegym.sandboxUrl" -}}
{{- printf "http://%s-sandbox:%d" (include "codegym.fullname" .) (int .Values.sandbox.service.port) }}
{{- end }}

{{/* The sandbox's workload: a StatefulSet when sessions are routed to their pods, else a Deployment. */}}
{{- define "codegym.sandboxKind" -}}
{{- if .Values.sandbox.sessions.enabled }}StatefulSet{{ else }}Deployment{{ end }}
{{- end }}

{{/* The Secret holding the API tokens. */}}
{{- define "codegym.secret" -}}
{{- default (printf "%s-tokens" (include "codegym.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{/* An environment variable from a key of the tokens' Secret; call with (dict "root" $ "name" NAME "key" KEY). */}}
{{- define "codegym.tokenEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "codegym.secret" .root }}
      key: {{ .key }}
{{- end }}

{{/* A volume from a claim when one is named, else an emptyDir; call with (dict "name" "results" "claim" "..."). */}}
{{- define "codegym.volume" -}}
- name: {{ .name }}
{{- if .claim }}
  persistentVolumeClaim:
    claimName: {{ .claim }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- end }}

{{/* The optional HF_TOKEN variable; call with the Secret's name. */}}
{{- define "codegym.hfToken" -}}
{{- if . }}
- name: HF_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: HF_TOKEN
{{- end }}
{{- end }}
