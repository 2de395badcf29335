{{- define "tide.labels" -}}
app.kubernetes.io/name: tide
{{- end }}
{{- define "tide.selector" -}}
app.kubernetes.io/name: tide
{{- end }}
