{{/* Names, labels and small derived values of the fleetpulse-agent chart. */}}

{{- define "fleetpulse-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fleetpulse-agent.fullname" -}}
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

{{- define "fleetpulse-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetpulse-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "fleetpulse-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetpulse-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: fleetpulse
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "fleetpulse-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetpulse-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when image.digest is set. */}}
{{- define "fleetpulse-agent.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Namespace of the pod checks' pods. */}}
{{- define "fleetpulse-agent.checksNamespace" -}}
{{- default .Release.Namespace .Values.checks.namespace }}
{{- end }}

{{/* Name of the ConfigMap holding the hub CA bundle, empty when there is none. */}}
{{- define "fleetpulse-agent.caConfigMap" -}}
{{- if .Values.hub.caBundle }}
{{- printf "%s-hub-ca" (include "fleetpulse-agent.fullname" .) }}
{{- else }}
{{- .Values.hub.caBundleConfigMap.name }}
{{- end }}
{{- end }}

{{/* Cross-field checks the schema cannot express with a clear message. */}}
{{- define "fleetpulse-agent.validate" -}}
{{- if not .Values.hub.url }}
{{- fail "hub.url is required: the hub's base URL, e.g. --set hub.url=https://fleetpulse.example.com" }}
{{- end }}
{{- if or (not .Values.cluster.namespace) (not .Values.cluster.name) }}
{{- fail "cluster.namespace and cluster.name are required: the MemberCluster on the hub this agent reports for, e.g. --set cluster.namespace=fleet --set cluster.name=edge-1" }}
{{- end }}
{{- if not (regexMatch "^https://([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*|\\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\\])(:[0-9]{1,5})?(/[^?#\\s]*)?$" .Values.hub.url) }}
{{- fail (printf "hub.url %q is not a hub URL: it must be https://HOST[:PORT][/PATH], HOST a DNS name, an IPv4 address or an IPv6 address in brackets (https://[fd00::1]:8443), with no query, fragment or credentials" .Values.hub.url) }}
{{- end }}
{{- if gt (len (compact (list .Values.hub.caBundle .Values.hub.caBundleConfigMap.name .Values.hub.caBundleSecret.name))) 1 }}
{{- fail "set one of hub.caBundle, hub.caBundleConfigMap.name and hub.caBundleSecret.name, not several" }}
{{- end }}
{{- if and .Values.hub.caBundle (not (contains "-----BEGIN CERTIFICATE-----" .Values.hub.caBundle)) }}
{{- fail "hub.caBundle is not a PEM certificate bundle (no -----BEGIN CERTIFICATE-----); pass the file with --set-file hub.caBundle=hub-ca.pem" }}
{{- end }}
{{- range $list := list "rules" "extraRules" }}
{{- range $i, $rule := index $.Values.rbac.read $list }}
{{- range $rule.resources }}
{{- if or (eq . "*") (eq . "secrets") (hasPrefix "secrets/" .) }}
{{- fail (printf "rbac.read.%s[%d] grants %q: the agent's read rules may not cover Secrets or every resource (*); its own key Secret has a Role of its own. List the resources your checks read instead." $list $i .) }}
{{- end }}
{{- end }}
{{- if has "*" $rule.apiGroups }}
{{- fail (printf "rbac.read.%s[%d] uses apiGroups \"*\": name the API groups your checks read" $list $i) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of the Secret holding the bootstrap token, empty when there is none. */}}
{{- define "fleetpulse-agent.bootstrapSecret" -}}
{{- if and (or .Values.bootstrap.token .Values.bootstrap.existingSecret) (not .Values.hub.caHash) }}
{{- fail "bootstrap.token and bootstrap.existingSecret need hub.caHash: the sha256:HEX that `fleetpulse-hub token create` printed" }}
{{- end }}
{{- if .Values.bootstrap.token }}
{{- printf "%s-bootstrap" (include "fleetpulse-agent.fullname" .) }}
{{- else }}
{{- .Values.bootstrap.existingSecret }}
{{- end }}
{{- end }}
