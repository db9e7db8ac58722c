{{/*
The labels every object carries: the two of deploy/base (name, part-of), and Helm's own on the
objects' metadata (never on the pod template: the DaemonSet's selector and its pods' labels stay
those of deploy/base, so an install made with kubectl apply -k can be adopted by the chart).
*/}}
{{- define "volagent.labels" -}}
app.kubernetes.io/name: volagent
app.kubernetes.io/part-of: volagent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The image reference of an image value (repository, tag). */}}
{{- define "volagent.image" -}}
{{ .repository }}:{{ .tag }}
{{- end -}}
