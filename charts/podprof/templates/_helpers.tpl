{{/*
podprof's named templates. The ones meant for your own charts read only
.Values (podprof's values), so they work both here, as
  {{ include "podprof.container" . }}
and from a chart that has podprof as a dependency, as
  {{ include "podprof.container" (dict "Values" .Values.podprof) }}
*/}}

{{/* The chart's name and a release-scoped name for the example's objects. */}}
{{- define "podprof.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podprof.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "podprof.labels" -}}
app.kubernetes.io/name: {{ include "podprof.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* --listen's value: host:port, [v6]:port, or :port for every address. */}}
{{- define "podprof.listen" -}}
{{- $host := .Values.listen.host | default "" -}}
{{- if contains ":" $host -}}
[{{ $host }}]:{{ int .Values.listen.port }}
{{- else -}}
{{ $host }}:{{ int .Values.listen.port }}
{{- end -}}
{{- end -}}

{{/* "true" when podprof listens on loopback only (the kubelet cannot probe it). */}}
{{- define "podprof.loopback" -}}
{{- $host := .Values.listen.host | default "" -}}
{{- if or (hasPrefix "127." $host) (eq $host "::1") (eq $host "localhost") -}}true{{- end -}}
{{- end -}}

{{- define "podprof.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ int .root.Values.listen.port }}
periodSeconds: {{ int .probe.periodSeconds }}
timeoutSeconds: {{ int .probe.timeoutSeconds }}
failureThreshold: {{ int .probe.failureThreshold }}
{{- end -}}

{{/*
The sidecar container, a list item for a pod spec's containers:
  containers:
    - name: app
      ...
    {{- include "podprof.container" . | nindent 4 }}
The pod needs shareProcessNamespace: true, and "podprof.volumes" in its
volumes when auth.existingSecret is set.
*/}}
{{- define "podprof.container" -}}
{{- $v := .Values -}}
{{- $t := $v.target | default dict -}}
{{- $pid := int ($t.pid | default 0) -}}
{{- $n := 0 -}}
{{- if gt $pid 0 }}{{ $n = add1 $n }}{{ end -}}
{{- if $t.comm }}{{ $n = add1 $n }}{{ end -}}
{{- if $t.exe }}{{ $n = add1 $n }}{{ end -}}
{{- if gt $n 1 -}}
{{- fail "podprof: set at most one of target.pid, target.comm and target.exe" -}}
{{- end -}}
{{- $nonRoot := eq $v.security.model "nonRoot" -}}
- name: {{ $v.containerName | default "podprof" }}
  image: {{ printf "%s:%s" (required "podprof: image.repository is required" $v.image.repository) (required "podprof: image.tag is required" $v.image.tag) | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy | default "IfNotPresent" }}
  args:
    - --listen={{ include "podprof.listen" . }}
    {{- if gt $pid 0 }}
    - --pid={{ $pid }}
    {{- end }}
    {{- with $t.comm }}
    - --comm={{ . }}
    {{- end }}
    {{- with $t.exe }}
    - --exe={{ . }}
    {{- end }}
    {{- if $t.tree }}
    - --tree
    {{- end }}
    - --hz={{ int $v.hz }}
    - --backend={{ $v.perfEvent.backend }}
    - --max-seconds={{ int $v.maxSeconds }}
    - --max-sessions={{ int $v.maxSessions }}
    - --max-cpu-percent={{ int $v.maxCpuPercent }}
    - --log-format={{ $v.log.format }}
    - --log-level={{ $v.log.level }}
    {{- if $v.auth.existingSecret }}
    - --auth-token-file={{ trimSuffix "/" $v.auth.mountPath }}/{{ $v.auth.key }}
    {{- end }}
    {{- if and $v.continuous $v.continuous.enabled }}
    - --continuous
    - --continuous-hz={{ int $v.continuous.hz }}
    {{- end }}
    {{- if and $v.switch $v.switch.configMap }}
    - --enable-file={{ trimSuffix "/" $v.switch.mountPath }}/{{ $v.switch.key }}
    {{- end }}
    {{- range $v.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- with $v.extraEnv }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    - name: pprof
      containerPort: {{ int $v.listen.port }}
      protocol: TCP
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- if $nonRoot }}
    runAsNonRoot: true
    runAsUser: {{ int $v.security.runAsUser }}
    runAsGroup: {{ int $v.security.runAsUser }}
    # File capabilities are ignored under no_new_privs (values.yaml, security.model).
    allowPrivilegeEscalation: true
    {{- else }}
    runAsNonRoot: false
    runAsUser: 0
    runAsGroup: 0
    allowPrivilegeEscalation: false
    {{- end }}
    readOnlyRootFilesystem: true
    capabilities:
      drop: [ALL]
      add: [SYS_PTRACE{{ if $v.security.sysNice }}, SYS_NICE{{ end }}{{ if $v.perfEvent.enabled }}, PERFMON, IPC_LOCK{{ end }}]
    {{- with $v.security.seccompProfile }}
    seccompProfile:
      type: {{ . }}
    {{- end }}
  {{- if not (include "podprof.loopback" .) }}
  {{- if $v.probes.liveness.enabled }}
  livenessProbe:
    {{- include "podprof.probe" (dict "root" . "probe" $v.probes.liveness "path" "/healthz") | nindent 4 }}
  {{- end }}
  {{- if $v.probes.readiness.enabled }}
  readinessProbe:
    {{- include "podprof.probe" (dict "root" . "probe" $v.probes.readiness "path" "/readyz") | nindent 4 }}
  {{- end }}
  {{- end }}
  {{- $switch := and $v.switch $v.switch.configMap }}
  {{- if or $v.auth.existingSecret $switch }}
  volumeMounts:
    {{- if $v.auth.existingSecret }}
    - name: podprof-auth
      mountPath: {{ $v.auth.mountPath }}
      readOnly: true
    {{- end }}
    {{- if $switch }}
    - name: podprof-switch
      mountPath: {{ $v.switch.mountPath }}
      readOnly: true
    {{- end }}
  {{- end }}
{{- end -}}

{{/*
The sidecar's volumes, list items for a pod spec's volumes (nothing when no
token, switch or agent is configured):
  volumes:
    {{- include "podprof.volumes" . | nindent 4 }}
optional: false is Kubernetes' default, spelled out because podman 4.3's
kube play crashes on a secret volume without it. With agent.enabled, the
emptyDir the init container fills with the allocation agent.
*/}}
{{- define "podprof.volumes" -}}
{{- include "podprof.volumeItems" . | trim -}}
{{- end -}}

{{- define "podprof.volumeItems" -}}
{{- if .Values.auth.existingSecret }}
- name: podprof-auth
  secret:
    secretName: {{ .Values.auth.existingSecret }}
    optional: false
    items:
      - key: {{ .Values.auth.key }}
        path: {{ .Values.auth.key }}
{{- end }}
{{- if and .Values.switch .Values.switch.configMap }}
- name: podprof-switch
  configMap:
    name: {{ .Values.switch.configMap }}
    optional: true
{{- end }}
{{- if include "podprof.agentEnabled" . }}
- name: podprof-agent
  emptyDir: {}
{{- end }}
{{- end -}}

{{/*
The allocation agent (agent.enabled; each template below renders nothing
without it). An init container copies libpodprof-alloc.so from podprof's
image into the emptyDir "podprof-agent" (in "podprof.volumes"); the
application container mounts it read-only and preloads the agent:
  initContainers:
    {{- include "podprof.agentInitContainer" . | nindent 4 }}
  containers:
    - name: app
      image: myapp:1.2
      env:
        {{- include "podprof.agentEnv" . | nindent 8 }}
      volumeMounts:
        {{- include "podprof.agentVolumeMount" . | nindent 8 }}
    {{- include "podprof.container" . | nindent 4 }}
  volumes:
    {{- include "podprof.volumes" . | nindent 4 }}
Which container is the application is yours to say: the one whose env and
volumeMounts include these (each container that should be seen, when there
are several). podprof itself needs neither: it finds the agent's records in
the application's memory.
*/}}
{{- define "podprof.agentEnabled" -}}
{{- if and .Values.agent .Values.agent.enabled -}}true{{- end -}}
{{- end -}}

{{- define "podprof.agentMountPath" -}}
{{- trimSuffix "/" (.Values.agent.mountPath | default "/podprof-agent") -}}
{{- end -}}

{{/* The init container, a list item for a pod spec's initContainers. */}}
{{- define "podprof.agentInitContainer" -}}
{{- if include "podprof.agentEnabled" . -}}
{{- $v := .Values -}}
{{- $dir := include "podprof.agentMountPath" . -}}
- name: {{ $v.agent.initContainerName | default "podprof-agent" }}
  image: {{ printf "%s:%s" (required "podprof: image.repository is required" $v.image.repository) (required "podprof: image.tag is required" $v.image.tag) | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy | default "IfNotPresent" }}
  # The agent from podprof's image into the shared emptyDir, readable by any uid.
  command: [/usr/bin/install, -m, "0644", /usr/lib/podprof/libpodprof-alloc.so, {{ printf "%s/libpodprof-alloc.so" $dir | quote }}]
  {{- with $v.agent.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ int $v.security.runAsUser }}
    runAsGroup: {{ int $v.security.runAsUser }}
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: [ALL]
    {{- with $v.security.seccompProfile }}
    seccompProfile:
      type: {{ . }}
    {{- end }}
  volumeMounts:
    - name: podprof-agent
      mountPath: {{ $dir }}
{{- end -}}
{{- end -}}

{{/* The application container's environment, list items for its env. */}}
{{- define "podprof.agentEnv" -}}
{{- if include "podprof.agentEnabled" . -}}
- name: LD_PRELOAD
  value: {{ printf "%s/libpodprof-alloc.so" (include "podprof.agentMountPath" .) | quote }}
{{- if hasKey .Values.agent "rate" }}
- name: PODPROF_ALLOC_RATE
  value: {{ int64 .Values.agent.rate | toString | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* The application container's mount, a list item for its volumeMounts. */}}
{{- define "podprof.agentVolumeMount" -}}
{{- if include "podprof.agentEnabled" . -}}
- name: podprof-agent
  mountPath: {{ include "podprof.agentMountPath" . }}
  readOnly: true
{{- end -}}
{{- end -}}
