{{/* Names, labels and small derived values of the fleetpulse-hub chart. */}}

{{- define "fleetpulse-hub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "fleetpulse-hub.fullname" -}}
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

{{- define "fleetpulse-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetpulse-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: hub
{{- end }}

{{- define "fleetpulse-hub.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fleetpulse-hub.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: fleetpulse
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "fleetpulse-hub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetpulse-hub.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when image.digest is set. */}}
{{- define "fleetpulse-hub.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "fleetpulse-hub.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "fleetpulse-hub.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{/* In-cluster DNS names of the hub's Service. */}}
{{- define "fleetpulse-hub.serviceDnsNames" -}}
{{- $svc := include "fleetpulse-hub.fullname" . }}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson }}
{{- end }}

{{/* The URL agents use: the ingress host, else the Service's in-cluster name. */}}
{{- define "fleetpulse-hub.url" -}}
{{- if .Values.ingress.enabled }}
{{- printf "https://%s" .Values.ingress.host }}
{{- else }}
{{- printf "https://%s.%s.svc:%d" (include "fleetpulse-hub.fullname" .) .Release.Namespace (int .Values.service.port) }}
{{- end }}
{{- end }}

{{/* The headless Service giving each replica sharing the fleet a DNS name. */}}
{{- define "fleetpulse-hub.replicasServiceName" -}}
{{- printf "%s-replicas" (include "fleetpulse-hub.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}

{{/*
The URL each replica sharing the fleet gives agents of its shards (--shard-url), with
$(POD_NAME) for Kubernetes to expand: sharding.replicaUrl, else the replica's name under
the headless Service.
*/}}
{{- define "fleetpulse-hub.replicaUrl" -}}
{{- if .Values.sharding.replicaUrl }}
{{- .Values.sharding.replicaUrl | trimSuffix "/" }}
{{- else }}
{{- printf "https://$(POD_NAME).%s.%s.svc:%d" (include "fleetpulse-hub.replicasServiceName" .) .Release.Namespace (int .Values.containerPort) }}
{{- end }}
{{- end }}

{{/*
The host names of the replicas sharing the fleet: each replica's URL with its Pod name
(<fullname>-0 .. <fullname>-(replicas-1)), and its name under the headless Service. A
JSON list.
*/}}
{{- define "fleetpulse-hub.replicaDnsNames" -}}
{{- $names := list }}
{{- $svc := include "fleetpulse-hub.replicasServiceName" . }}
{{- range $i := until (int .Values.replicas) }}
{{- $pod := printf "%s-%d" (include "fleetpulse-hub.fullname" $) $i }}
{{- $url := replace "$(POD_NAME)" $pod (include "fleetpulse-hub.replicaUrl" $) }}
{{- $names = append $names (index (splitList ":" (urlParse $url).host) 0) }}
{{- $names = append $names (printf "%s.%s.%s.svc" $pod $svc $.Release.Namespace) }}
{{- $names = append $names (printf "%s.%s.%s.svc.cluster.local" $pod $svc $.Release.Namespace) }}
{{- end }}
{{- $names | uniq | toJson }}
{{- end }}

{{/* Cross-field checks the schema cannot express with a clear message. */}}
{{- define "fleetpulse-hub.validate" -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) }}
{{- fail "tls.certManager.enabled is true but tls.certManager.issuerRef.name is empty: name the cert-manager Issuer or ClusterIssuer that signs the hub's certificate" }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) }}
{{- fail "ingress.enabled is true but ingress.host is empty: set the host agents connect to, e.g. fleetpulse.example.com" }}
{{- end }}
{{- if eq (int .Values.admin.port) (int .Values.containerPort) }}
{{- fail "admin.port equals containerPort: the admin listener (read API, /metrics) needs a port of its own, e.g. 9443" }}
{{- end }}
{{- if and .Values.service.loadBalancerSourceRanges (ne .Values.service.type "LoadBalancer") }}
{{- fail "service.loadBalancerSourceRanges is set but service.type is not LoadBalancer" }}
{{- end }}
{{- range $i, $default := .Values.mirrors.defaults }}
{{- $kind := index (splitList ":" $default) 0 }}
{{- if not (has $kind $.Values.mirrors.kinds) }}
{{- fail (printf "mirrors.defaults[%d] mirrors onto %s, which mirrors.kinds does not enable: add %s to mirrors.kinds" $i $kind $kind) }}
{{- end }}
{{- end }}
{{- if .Values.sharding.enabled }}
{{- if gt (int .Values.replicas) (int .Values.sharding.shards) }}
{{- fail (printf "replicas (%d) is more than sharding.shards (%d): a replica beyond the shard count would own nothing; lower replicas or raise sharding.shards" (int .Values.replicas) (int .Values.sharding.shards)) }}
{{- end }}
{{- if gt (len (include "fleetpulse-hub.fullname" .)) 52 }}
{{- fail (printf "the release's full name %q is longer than 52 characters, too long for a StatefulSet's Pod names (sharding.enabled): set fullnameOverride" (include "fleetpulse-hub.fullname" .)) }}
{{- end }}
{{- end }}
{{- range $i, $rule := .Values.rbac.hubReads }}
{{- if or (has "*" $rule.apiGroups) (has "*" $rule.resources) }}
{{- fail (printf "rbac.hubReads[%d] uses \"*\": name the API groups and resources hub-side checks read" $i) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The API group and resource of each mirror kind (mirrors.kinds), as "group/resource".
*/}}
{{- define "fleetpulse-hub.mirrorResource" -}}
{{- $resources := dict
  "sveltoscluster" "lib.projectsveltos.io/sveltosclusters"
  "capi-cluster" "cluster.x-k8s.io/clusters"
  "argocd-secret" "/secrets"
  "ocm-managedcluster" "cluster.open-cluster-management.io/managedclusters"
  "karmada-cluster" "cluster.karmada.io/clusters"
  "kubefleet-membercluster" "cluster.kubernetes-fleet.io/memberclusters" -}}
{{- get $resources . -}}
{{- end }}
