{{/*
The hub's Pod template, shared by the Deployment (leader election) and the StatefulSet
(replicas sharing the fleet, sharding.enabled); only the Lease flags differ.
*/}}
{{- define "fleetpulse-hub.podTemplate" -}}
metadata:
  labels:
    {{- include "fleetpulse-hub.labels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "fleetpulse-hub.serviceAccountName" . }}
  automountServiceAccountToken: true
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: hub
      image: {{ include "fleetpulse-hub.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        - --kube
        - --listen=0.0.0.0:{{ .Values.containerPort }}
        - --admin-listen=0.0.0.0:{{ .Values.admin.port }}
        - --admin-auth=kubernetes
        - --tls-cert=/etc/fleetpulse/tls/tls.crt
        - --tls-key=/etc/fleetpulse/tls/tls.key
        - --audience={{ .Values.audience }}
        {{- if .Values.sharding.enabled }}
        - --shards={{ .Values.sharding.shards }}
        - {{ printf "--shard-url=%s" (include "fleetpulse-hub.replicaUrl" .) | quote }}
        - --lease-namespace={{ .Release.Namespace }}
        - --lease-duration-seconds={{ .Values.sharding.leaseDurationSeconds }}
        {{- else }}
        - --leader-elect
        - --lease-namespace={{ .Release.Namespace }}
        - --lease-name={{ .Values.leaderElection.leaseName }}
        - --lease-duration-seconds={{ .Values.leaderElection.leaseDurationSeconds }}
        {{- end }}
        - --status-refresh-seconds={{ .Values.statusRefreshSeconds }}
        - --log-format={{ .Values.logFormat }}
        {{- if .Values.metrics.perCluster }}
        - --per-cluster-metrics
        {{- end }}
        {{- if .Values.mirrors.kinds }}
        - --mirror-resync-seconds={{ .Values.mirrors.resyncSeconds }}
        {{- end }}
        {{- range .Values.mirrors.defaults }}
        - {{ printf "--mirror-default=%s" . | quote }}
        {{- end }}
        - --enrolment-namespace={{ .Release.Namespace }}
        {{- range .Values.adoption.kinds }}
        - --adopt={{ . }}
        {{- end }}
        {{- with .Values.adoption.selector }}
        - {{ printf "--adopt-selector=%s" . | quote }}
        {{- end }}
        {{- if .Values.adoption.kinds }}
        - --adopt-namespace={{ default .Release.Namespace .Values.adoption.namespace }}
        - --adopt-argocd-namespace={{ .Values.mirrors.argocdNamespace }}
        {{- end }}
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      env:
        {{- if .Values.sharding.enabled }}
        # The replica's identity on its shard Leases; Kubernetes expands $(POD_NAME) in
        # --shard-url from it.
        {{- else }}
        # Leader election identity and the default Lease namespace.
        {{- end }}
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: RUST_LOG
          value: {{ .Values.logLevel | quote }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: https
          containerPort: {{ .Values.containerPort }}
          protocol: TCP
        - name: admin
          containerPort: {{ .Values.admin.port }}
          protocol: TCP
      startupProbe:
        httpGet:
          path: /healthz
          port: https
          scheme: HTTPS
        periodSeconds: 2
        failureThreshold: 30
      livenessProbe:
        httpGet:
          path: /healthz
          port: https
          scheme: HTTPS
        periodSeconds: 10
        timeoutSeconds: 3
        failureThreshold: 3
      readinessProbe:
        httpGet:
          path: /readyz
          port: https
          scheme: HTTPS
        periodSeconds: 5
        timeoutSeconds: 3
        failureThreshold: 2
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tls
          mountPath: /etc/fleetpulse/tls
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: tls
      secret:
        secretName: {{ include "fleetpulse-hub.tlsSecretName" . }}
        defaultMode: 0440
    - name: tmp
      emptyDir:
        sizeLimit: 16Mi
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- else }}
  {{- if and .Values.sharding.enabled (not .Values.affinity) }}
  # Replicas sharing the fleet, spread over nodes where the scheduler can: a node lost
  # takes as few shards with it as it may.
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "fleetpulse-hub.selectorLabels" . | nindent 10 }}
  {{- end }}
  {{- end }}
{{- end }}
