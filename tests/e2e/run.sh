#!/bin/bash
# The pod end-to-end test (make e2e): podprof's image and chart, for real.
#
#   base image   localhost/debian:bookworm-slim from debootstrap when missing
#                (podman's store caches it between runs; a fresh machine makes it)
#   images       the podprof image (Dockerfile; the allocation agent in it) and
#                an application image (tests/e2e/app: tests/fixtures/busy.c and
#                allocs.c, which the sidecar image does not contain), built
#                with podman
#   chart        charts/podprof rendered by tests/e2e/render (helm's engine:
#                text/template + sprig), bad values rejected naming the value,
#                agent.enabled's init container, emptyDir, mount and env
#   pod specs    the chart's example Deployment played with
#                `podman kube play --network none`, three times: SYS_PTRACE
#                only (loopback listen), and SYS_PTRACE + SYS_NICE (listen
#                :8008, a token from a Secret, probes), with the user's
#                workflow through the pod's network namespace as kubectl
#                port-forward reaches it (nsenter --net): go tool pprof on
#                the CPU profile, the thread dump, the index, cmdline,
#                symbol, metrics, healthz; and agent.enabled with allocs.c as
#                the app: the init container's copy preloaded, go tool pprof
#                on heap and allocs naming keep_alpha and keep_beta,
#                heap?view=mappings
#   ephemeral    podman run --pid=container:APP --network=container:APP
#                --cap-add SYS_PTRACE IMAGE, the analogue of kubectl debug --target
#   k8s caps     podman gives a non-root container its added capabilities as
#                ambient ones; Kubernetes does not (bounding set only), which is
#                why the image's binary has file capabilities. These runs start
#                podprof the Kubernetes way (setpriv: uid 65532, the pod's
#                capabilities in the bounding set only, nothing else), with
#                SYS_PTRACE, with SYS_PTRACE + SYS_NICE, and under no_new_privs
#                (allowPrivilegeEscalation: false), where it must say so.
#
# Prints PASS/FAIL/SKIP lines, each phase's time, and ends with
# "N passed, N failed, N skipped".
# Needs root, podman, runc, debootstrap, go, nsenter, curl (scripts/deps.sh).
set -u -o pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export CONTAINERS_CONF=$ROOT/tests/e2e/containers.conf
OUT=$ROOT/tests/out/e2e
rm -rf "$OUT" && mkdir -p "$OUT"
export PPROF_TMPDIR=$OUT/pprof HOME=${HOME:-/root}
export GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$ROOT/build/e2e/gocache GOFLAGS=

BASE=${PODPROF_E2E_BASE:-localhost/debian:bookworm-slim}
IMG=localhost/podprof:e2e
APP=localhost/podprof-e2e-app:e2e
RENDER=$ROOT/build/e2e/render
PREFIX=podprof-e2e                      # every container, pod and secret we make
PASSED=0 FAILED=0 SKIPPED=0
T0=$(date +%s.%N)
PHASE="" PHASE_T0=$T0
TIMINGS=()

pass() { PASSED=$((PASSED + 1)); echo "PASS $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1${2:+: $2}"; }
# check NAME CMD...: PASS when CMD succeeds.
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n"; fi; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
phase() {
	local now; now=$(date +%s.%N)
	if [ -n "$PHASE" ]; then
		TIMINGS+=("$(printf '%-34s %6ss' "$PHASE" "$(secs "$PHASE_T0" "$now")")")
		echo "time $PHASE: $(secs "$PHASE_T0" "$now")s"
	fi
	PHASE=$1 PHASE_T0=$now
	[ -n "$1" ] && echo "== $1"
}

cleanup() {
	for y in "$OUT"/*.play.yaml; do
		[ -e "$y" ] && podman kube down "$y" > /dev/null 2>&1
	done
	podman ps -a --format '{{.Names}}' 2>/dev/null | grep "^$PREFIX" | xargs -r podman rm -f -t 0 > /dev/null 2>&1
	podman pod ps --format '{{.Name}}' 2>/dev/null | grep "^$PREFIX" | xargs -r podman pod rm -f > /dev/null 2>&1
	podman secret ls --format '{{.Name}}' 2>/dev/null | grep "^$PREFIX" | xargs -r podman secret rm > /dev/null 2>&1
	# podman 4.3 plays the chart's emptyDir as an anonymous volume named after
	# it, which kube down removes and rm -f leaves.
	if [ "$(podman volume inspect podprof-agent --format '{{.Anonymous}}' 2>/dev/null)" = true ]; then
		podman volume rm podprof-agent > /dev/null 2>&1
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
	cleanup
	phase ""
	echo "== timings"
	printf '  %s\n' "${TIMINGS[@]}"
	echo "  total $(secs "$T0" "$(date +%s.%N)")s"
	echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	[ "$FAILED" -eq 0 ]
	exit
}
# A step everything after depends on: stop here when it fails.
must() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n"; finish; fi; }

section() { sed -n "/^# \[$1\]/,/^# \[/{/^[^#]/p}" scripts/packages.txt | cut -d' ' -f1 | tr '\n' ' '; }

# In the pod's network namespace, as kubectl port-forward reaches the port.
in_net() { local pid=$1; shift; nsenter --net="/proc/$pid/ns/net" "$@"; }
# get PID PATH FILE [curl args...]: the body into FILE, the status into CODE.
get() {
	local pid=$1 path=$2 file=$3; shift 3
	CODE=$(in_net "$pid" curl -s -m 30 -o "$file" -w '%{http_code}' "$@" "http://127.0.0.1:8008$path")
}

# wait_log CONTAINER REGEX SECONDS: until the container's log matches.
wait_log() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		podman logs "$1" 2>&1 | grep -qE "$2" && return 0
		sleep 0.1
	done
	echo "  log of $1:"; podman logs "$1" 2>&1 | sed 's/^/    /' | tail -n 20
	return 1
}
cpid() { podman inspect "$1" --format '{{.State.Pid}}' 2>/dev/null; }
status_field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" | head -n 1; }
has_cap() { (( (16#$(status_field "$1" CapEff) >> $2) & 1 )); }   # PID BIT
lacks_cap() { ! has_cap "$@"; }
# all_in FILE STRING...: every string occurs in FILE.
all_in() { local f=$1 s; shift; for s; do grep -qF -- "$s" "$f" || return 1; done; }
sampler_nice() {   # the nice value of podprof's thread named sampler
	local t
	for t in /proc/"$1"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = sampler ] && awk '{ sub(/.*\) /, ""); print $17 }' "$t/stat" && return
	done
}

# The user's workflow against a podprof whose network namespace is PID's.
# workflow NAME PID CONTAINER [curl auth args...]
workflow() {
	local n=$1 pid=$2 ctr=$3; shift 3
	local o=$OUT/$n
	get "$pid" /healthz "$o.healthz"
	check "$n: /healthz answers ok" [ "$CODE" = 200 -a "$(cat "$o.healthz")" = ok ]
	get "$pid" "/debug/pprof/profile?seconds=3" "$o.cpu.pb.gz" "$@"
	check "$n: profile?seconds=3 answers 200" [ "$CODE" = 200 ]
	# go tool pprof fetches the URL itself where no token is needed, as a
	# user would after kubectl port-forward; else it reads what curl saved.
	if [ $# -eq 0 ]; then
		in_net "$pid" go tool pprof -raw "http://127.0.0.1:8008/debug/pprof/profile?seconds=3" \
			> "$o.raw" 2> "$o.pprof.err"
	else
		go tool pprof -raw "$o.cpu.pb.gz" > "$o.raw" 2> "$o.pprof.err"
	fi
	check "$n: go tool pprof reads the CPU profile" grep -q '^Samples:' "$o.raw"
	check "$n: CPU stacks name busy's functions (hot_a, hot_b, level3, level1, main)" \
		all_in "$o.raw" ' hot_a ' ' hot_b ' ' level3 ' ' level1 ' ' main '
	check "$n: its mapping is the app container's binary, /usr/local/bin/busy" grep -q '/usr/local/bin/busy' "$o.raw"
	get "$pid" "/debug/pprof/goroutine?debug=2" "$o.goroutine2.txt" "$@"
	check "$n: goroutine?debug=2 shows the app's threads (\"blocked\" in blocked_reader, main)" \
		eval '[ "$CODE" = 200 ] && all_in "$o.goroutine2.txt" "thread \"blocked\"" "blocked_reader(" "main("'
	get "$pid" "/debug/pprof/goroutine?debug=1" "$o.goroutine1.txt" "$@"
	check "$n: goroutine?debug=1 groups the threads" \
		eval '[ "$CODE" = 200 ] && grep -q "^goroutine profile: total [0-9]" "$o.goroutine1.txt"'
	get "$pid" /debug/pprof/goroutine "$o.goroutine.pb.gz" "$@"
	go tool pprof -traces "$o.goroutine.pb.gz" > "$o.goroutine.traces" 2>&1
	check "$n: go tool pprof reads the goroutine profile" \
		eval '[ "$CODE" = 200 ] && grep -q blocked_reader "$o.goroutine.traces"'
	get "$pid" /debug/pprof/ "$o.index.html" "$@"
	check "$n: /debug/pprof/ index names the target (busy) and links the profiles" \
		eval '[ "$CODE" = 200 ] && all_in "$o.index.html" "<td>busy</td>" "/usr/local/bin/busy" "goroutine?debug=1"'
	get "$pid" /debug/pprof/cmdline "$o.cmdline" "$@"
	check "$n: cmdline is the app's argv, NUL-separated" \
		eval '[ "$CODE" = 200 ] && [ "$(tr "\0" " " < "$o.cmdline")" = "/usr/local/bin/busy -t 1 -b 2" ]'
	local addr
	addr=$(awk '/^Locations/ { l = 1; next } l && / hot_a / { print $2; exit }' "$o.raw")
	get "$pid" "/debug/pprof/symbol?$addr" "$o.symbol" "$@"
	check "$n: symbol names hot_a's address ($addr)" \
		eval '[ "$CODE" = 200 ] && [ -n "$addr" ] && all_in "$o.symbol" "num_symbols: 1" " hot_a"'
	get "$pid" /metrics "$o.metrics" "$@"
	check "$n: /metrics counts the samples" eval '[ "$CODE" = 200 ] && grep -Eq "^podprof_thread_samples_total [1-9]" "$o.metrics"'
	get "$pid" /debug/pprof/heap "$o.heap.pb.gz" "$@"
	go tool pprof -top "$o.heap.pb.gz" > "$o.heap.top" 2>&1
	check "$n: heap: the app's memory by mapping, its binary's code among it" \
		eval '[ "$CODE" = 200 ] && all_in "$o.heap.top" "Type: inuse_space" "/usr/local/bin/busy" "code"'
	get "$pid" "/debug/pprof/block?seconds=2" "$o.block.pb.gz" "$@"
	go tool pprof -traces -sample_index=delay "$o.block.pb.gz" > "$o.block.traces" 2>&1
	check "$n: block: the blocked readers wait in read under blocked_reader" \
		eval '[ "$CODE" = 200 ] && all_in "$o.block.traces" "syscall read" "blocked_reader"'
	# The user's command, wget .../trace?seconds=5 && go tool trace 'trace?seconds=5',
	# with curl (which sends the token) saving under wget's file name.
	local tdir=$o.trace   # check() has a local n of its own: use no $n in its evals
	mkdir -p "$tdir"
	get "$pid" "/debug/pprof/trace?seconds=2" "$tdir/trace?seconds=2" "$@"
	check "$n: trace?seconds=2, then go tool trace -d reads it" \
		eval '(cd "$tdir" && [ -s "trace?seconds=2" ] && go tool trace -d "trace?seconds=2" > trace.d 2>&1)'
	check "$n: go tool trace -pprof=syscall names the readers' read" \
		eval '(cd "$tdir" && go tool trace -pprof=syscall "trace?seconds=2" > sys.pb 2> /dev/null && go tool pprof -top sys.pb 2>&1 | grep -q "syscall read")'
}

# ---------------------------------------------------------------------------
phase "base image"
must "base image $BASE (debootstrap when missing)" tests/e2e/base-image.sh "$BASE"

phase "podprof image"
if podman build --network=host --build-arg BASE="$BASE" \
	--build-arg GIT_REV="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
	-t "$IMG" . > "$OUT/build-podprof.log" 2>&1; then
	pass "podman build the podprof image"
else
	tail -n 30 "$OUT/build-podprof.log"; fail "podman build the podprof image"; finish
fi
SIZE=$(podman image inspect "$IMG" --format '{{.Size}}')
echo "  image size: $SIZE bytes ($(awk -v s="$SIZE" 'BEGIN { printf "%.1f MB", s / 1e6 }')); base: $(podman image inspect "$BASE" --format '{{.Size}}') bytes"
check "image runs as uid 65532" [ "$(podman image inspect "$IMG" --format '{{.Config.User}}')" = 65532:65532 ]
check "image exposes 8008" sh -c "podman image inspect '$IMG' --format '{{json .Config.ExposedPorts}}' | grep -q 8008/tcp"
MNT=$(podman image mount "$IMG")
check "binary has permitted-only file capabilities cap_ipc_lock,cap_sys_ptrace,cap_sys_nice,cap_perfmon=p" \
	sh -c "getcap '$MNT/usr/local/bin/podprof' | grep -q 'cap_ipc_lock,cap_sys_ptrace,cap_sys_nice,cap_perfmon=p$'"
check "no compiler, make or setcap in the runtime image" \
	sh -c "! ls '$MNT'/usr/bin/{cc,gcc,make,setcap,protoc-c} 2>/dev/null | grep -q ."
check "no setuid/setgid files in the runtime image" \
	sh -c "[ -z \"\$(find '$MNT' -xdev -type f -perm /6000 2>/dev/null)\" ]"
check "libc6-dbg's build-id files are in the image" sh -c "ls '$MNT'/usr/lib/debug/.build-id/*/*.debug > /dev/null 2>&1"
check "the application's binary is not in the sidecar image" sh -c "[ ! -e '$MNT/usr/local/bin/busy' ]"
AGENT=$MNT/usr/lib/podprof/libpodprof-alloc.so
check "the allocation agent is in the image: /usr/lib/podprof/libpodprof-alloc.so, root's, mode 0644 (any uid reads it)" \
	eval '[ "$(stat -c "%u:%g %a" "$AGENT" 2>/dev/null)" = "0:0 644" ]'
AGENT_SUM=$(sha256sum < "$AGENT" 2>/dev/null | cut -d' ' -f1)
AGENT_GLIBC=$(objdump -T "$AGENT" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
echo "  agent: $(stat -c %s "$AGENT" 2>/dev/null) bytes, needs ${AGENT_GLIBC:-?} (its newest glibc symbol version)"
check "the agent needs libc only, and glibc 2.17 at most (${AGENT_GLIBC:-none found})" \
	eval '[ "$(objdump -p "$AGENT" | awk "/NEEDED/ { print \$2 }" | sort | paste -sd " ")" = "libc.so.6" ] &&
		[ -n "$AGENT_GLIBC" ] && [ "$(printf "%s\n" "$AGENT_GLIBC" GLIBC_2.17 | sort -V | tail -n 1)" = GLIBC_2.17 ]'
podman image unmount "$IMG" > /dev/null
podman run --rm "$IMG" --help > "$OUT/help.txt" 2>&1
check "podprof --help runs in the image" grep -q -- '--auth-token-file' "$OUT/help.txt"

phase "application image"
if podman build --network=host --build-arg BASE="$BASE" --build-arg PKGS="$(section e2e-app)" \
	-t "$APP" -f tests/e2e/app/Dockerfile tests/fixtures > "$OUT/build-app.log" 2>&1; then
	pass "podman build the application image (busy.c, allocs.c, prefork.c)"
else
	tail -n 30 "$OUT/build-app.log"; fail "podman build the application image"; finish
fi

phase "chart render"
must "build the renderer (text/template + sprig, GOPATH mode)" go build -o "$RENDER" ./tests/e2e/render
C=charts/podprof
"$RENDER" "$C" > "$OUT/default.yaml" 2> "$OUT/default.err"
check "default values render (nothing but the named templates)" [ $? -eq 0 -a ! -s "$OUT/default.yaml" ]
"$RENDER" --notes "$C" > "$OUT/notes.txt" 2>&1
check "NOTES.txt prints port-forward and go tool pprof" \
	sh -c "grep -q 'kubectl -n default port-forward' '$OUT/notes.txt' && grep -q 'go tool pprof http://localhost:8008/debug/pprof/profile' '$OUT/notes.txt'"
bad() {   # bad NAME EXPECTED-MESSAGE --set ...
	local n=$1 want=$2; shift 2
	if "$RENDER" "$@" "$C" > /dev/null 2> "$OUT/bad.err"; then
		fail "$n" "rendered"
	elif grep -qF -- "$want" "$OUT/bad.err"; then
		pass "$n"
	else
		fail "$n" "$(cat "$OUT/bad.err")"
	fi
}
bad "schema rejects hz=5000, naming it" "- hz: Must be less than or equal to 1000" --set hz=5000
bad "schema rejects a string port, naming it" "- listen.port: Invalid type. Expected: integer, given: string" --set listen.port=http
bad "schema rejects an unknown model, naming it" "- security.model: model must be one of the following" --set security.model=admin
bad "schema rejects a misspelt value, naming it" "Additional property maxSecond is not allowed" --set maxSecond=10
bad "schema rejects log.format=xml, naming it" "- log.format: format must be one of the following: \"text\", \"json\"" --set log.format=xml
bad "two target selectors fail, naming them" "set at most one of target.pid, target.comm and target.exe" \
	--set example.enabled=true --set example.app.image=x --set target.pid=7 --set target.comm=busy
bad "the example needs an app image (required)" "example.app.image is required" --set example.enabled=true
"$RENDER" --set example.enabled=true --set example.app.image=x "$C" > "$OUT/nonroot.yaml"
check "nonRoot model renders uid 65532, allowPrivilegeEscalation: true, drop ALL, add SYS_PTRACE+SYS_NICE" \
	all_in "$OUT/nonroot.yaml" "runAsUser: 65532" "runAsNonRoot: true" "allowPrivilegeEscalation: true" \
	"readOnlyRootFilesystem: true" "drop: [ALL]" "add: [SYS_PTRACE, SYS_NICE]"
"$RENDER" --set example.enabled=true --set example.app.image=x --set security.model=root \
	--set security.sysNice=false "$C" > "$OUT/root.yaml"
check "root model renders uid 0, allowPrivilegeEscalation: false, add SYS_PTRACE only" \
	all_in "$OUT/root.yaml" "runAsUser: 0" "runAsNonRoot: false" "allowPrivilegeEscalation: false" "add: [SYS_PTRACE]"
"$RENDER" --set example.enabled=true --set example.app.image=x --set perfEvent.enabled=true \
	--set perfEvent.backend=perf_event "$C" > "$OUT/perf.yaml"
check "perfEvent.enabled adds PERFMON and IPC_LOCK; perfEvent.backend passes --backend" \
	all_in "$OUT/perf.yaml" "add: [SYS_PTRACE, SYS_NICE, PERFMON, IPC_LOCK]" "- --backend=perf_event"
bad "schema rejects perfEvent.backend=ebpf, naming it" "- perfEvent.backend: backend must be one of the following" \
	--set perfEvent.backend=ebpf
# Every flag the chart passes exists in podprof --help.
"$RENDER" --set example.enabled=true --set example.app.image=x --set target.comm=busy \
	--set auth.existingSecret=s "$C" > "$OUT/all-flags.yaml"
"$RENDER" --set example.enabled=true --set example.app.image=x --set target.pid=7 "$C" >> "$OUT/all-flags.yaml"
"$RENDER" --set example.enabled=true --set example.app.image=x --set target.exe=busy "$C" >> "$OUT/all-flags.yaml"
"$RENDER" --set example.enabled=true --set example.app.image=x --set target.comm=busy --set target.tree=true \
	"$C" > "$OUT/tree.yaml"
cat "$OUT/tree.yaml" >> "$OUT/all-flags.yaml"
check "target.tree passes --tree beside the selector" all_in "$OUT/tree.yaml" "- --comm=busy" "- --tree"
"$RENDER" --set example.enabled=true --set example.app.image=x --set continuous.enabled=true \
	--set switch.configMap=podprof-switch "$C" > "$OUT/switch.yaml"
cat "$OUT/switch.yaml" >> "$OUT/all-flags.yaml"
check "switch.configMap mounts the ConfigMap whole and passes --enable-file; continuous.enabled passes --continuous" \
	all_in "$OUT/switch.yaml" "- --enable-file=/etc/podprof/switch/profiling.enable" "name: podprof-switch" \
	"configMap:" "mountPath: /etc/podprof/switch" "- --continuous" "- --continuous-hz=10"
# agent_spec FILE MOUNTPATH RATE VOLUME...: the example Deployment rendered
# as JSON (render --json) has the allocation agent's init container (podprof's
# image, copying the agent into MOUNTPATH; non-root, no capability), the
# emptyDir among exactly VOLUME..., and in the app container (example.app)
# the read-only mount and env LD_PRELOAD=MOUNTPATH/libpodprof-alloc.so,
# PODPROF_ALLOC_RATE=RATE; podprof's container has neither.
agent_spec() {
	python3 - "$@" <<'PY'
import json, sys
f, mount, rate, *vols = sys.argv[1:]
docs = [json.loads(l) for l in open(f)]
deps = [d for d in docs if d["kind"] == "Deployment"]
assert len(deps) == 1, "want one Deployment, have %d" % len(deps)
spec = deps[0]["spec"]["template"]["spec"]
so = mount + "/libpodprof-alloc.so"
init = spec.get("initContainers", [])
assert [c["name"] for c in init] == ["podprof-agent"], init
ic = init[0]
ctrs = {c["name"]: c for c in spec["containers"]}
app, side = ctrs["app"], ctrs["podprof"]
assert ic["image"] == side["image"] and ic["imagePullPolicy"] == side["imagePullPolicy"], "init image"
assert ic["command"] == ["/usr/bin/install", "-m", "0644", "/usr/lib/podprof/libpodprof-alloc.so", so], ic["command"]
assert ic["volumeMounts"] == [{"name": "podprof-agent", "mountPath": mount}], ic["volumeMounts"]
sc = ic["securityContext"]
assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532 and sc["allowPrivilegeEscalation"] is False, sc
assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"] == {"drop": ["ALL"]}, sc
assert [v["name"] for v in spec["volumes"]] == vols, spec["volumes"]
assert {"name": "podprof-agent", "emptyDir": {}} in spec["volumes"], spec["volumes"]
assert app["volumeMounts"] == [{"name": "podprof-agent", "mountPath": mount, "readOnly": True}], app
assert app["env"] == [{"name": "LD_PRELOAD", "value": so}, {"name": "PODPROF_ALLOC_RATE", "value": rate}], app["env"]
assert "podprof-agent" not in json.dumps(side) and "LD_PRELOAD" not in json.dumps(side), side
PY
}
"$RENDER" --json --set agent.enabled=true --set example.enabled=true --set example.app.image=x "$C" > "$OUT/agent.json"
check "agent.enabled: an init container copies the agent into the emptyDir podprof-agent; the example's app mounts it read-only with LD_PRELOAD=/podprof-agent/libpodprof-alloc.so, PODPROF_ALLOC_RATE=524288" \
	agent_spec "$OUT/agent.json" /podprof-agent 524288 podprof-agent
"$RENDER" --json --set agent.enabled=true --set agent.mountPath=/opt/podprof --set agent.rate=65536 \
	--set auth.existingSecret=s --set switch.configMap=c --set example.enabled=true --set example.app.image=x \
	"$C" > "$OUT/agent-all.json"
check "agent.enabled with agent.mountPath, agent.rate, a token and the switch: the agent's volume beside theirs" \
	agent_spec "$OUT/agent-all.json" /opt/podprof 65536 podprof-auth podprof-switch podprof-agent
"$RENDER" --json --set example.enabled=true --set example.app.image=x "$C" > "$OUT/no-agent.json"
check "agent.enabled false (the default): no init container, volume, mount or LD_PRELOAD" \
	sh -c "! grep -qE 'initContainers|podprof-agent|LD_PRELOAD' '$OUT/no-agent.json'"
"$RENDER" --set agent.enabled=true "$C" > "$OUT/agent-only.yaml" 2>&1
check "agent.enabled without the example renders nothing (named templates only)" [ $? -eq 0 -a ! -s "$OUT/agent-only.yaml" ]
"$RENDER" --notes --set agent.enabled=true "$C" > "$OUT/agent-notes.txt" 2>&1
check "NOTES.txt with agent.enabled shows the init container, the app's env and mount, heap, and the glibc requirement" \
	all_in "$OUT/agent-notes.txt" 'include "podprof.agentInitContainer"' 'include "podprof.agentEnv"' \
	'include "podprof.agentVolumeMount"' 'value: "/podprof-agent/libpodprof-alloc.so"' \
	'go tool pprof -top http://localhost:8008/debug/pprof/heap' 'glibc >= 2.17'
bad "schema rejects a relative agent.mountPath, naming it" "- agent.mountPath: Does not match pattern" \
	--set agent.mountPath=podprof-agent
bad "schema rejects agent.rate=-1, naming it" "- agent.rate: Must be greater than or equal to 0" --set agent.rate=-1
missing=""
for f in $(grep -oE -- '- --[a-z-]+' "$OUT/all-flags.yaml" | sed 's/^- //' | sort -u); do
	grep -q -- "  $f " "$OUT/help.txt" || missing="$missing $f"
done
check "every flag the chart passes is in podprof --help${missing:+ (missing:$missing)}" [ -z "$missing" ]

# ---------------------------------------------------------------------------
# A manifest without its "ports:" lists.
without_ports() {
	awk 'skip { match($0, /^ */); if (RLENGTH > ind || (RLENGTH == ind && $0 ~ /^ *- /)) next; skip = 0 }
	     /^ *ports:$/ { skip = 1; match($0, /^ */); ind = RLENGTH; next }
	     { print }'
}

# set_switch DIR true|false: the ConfigMap key profiling.enable, written as
# the kubelet writes a ConfigMap volume (..data -> a new directory, swapped).
set_switch() {
	local d=$1 v=$2 new=..$(date +%s%N)
	mkdir "$1/$new" && printf '%s' "$v" > "$1/$new/profiling.enable"
	ln -sfn "$new" "$1/..data_tmp" && mv -T "$1/..data_tmp" "$1/..data"
	[ -L "$1/profiling.enable" ] || ln -s ..data/profiling.enable "$1/profiling.enable"
}

# wait_count CONTAINER REGEX N SECONDS: until N lines of its log match.
wait_count() {
	local i
	for ((i = 0; i < $4 * 10; i++)); do
		[ "$(podman logs "$1" 2>&1 | grep -cE "$2")" -ge "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

# switch_flip NAME PID CONTAINER DIR: the Knative-style switch off and on.
switch_flip() {
	local n=$1 pid=$2 side=$3 sw=$4
	set_switch "$sw" false
	check "$n: switch false: podprof says so within seconds" wait_log "$side" 'profiling disabled' 5
	get "$pid" /debug/pprof/goroutine "$OUT/$n.off"
	check "$n: switch false: /debug/pprof/* answers 404" [ "$CODE" = 404 ]
	get "$pid" /healthz "$OUT/$n.off.healthz"
	check "$n: switch false: /healthz still answers" [ "$CODE" = 200 ]
	set_switch "$sw" true
	check "$n: switch true: podprof says so within seconds" wait_count "$side" 'profiling enabled' 2 5
	get "$pid" /debug/pprof/goroutine "$OUT/$n.on"
	check "$n: switch true: profiles again" [ "$CODE" = 200 ]
}

# flat FILE FUNCTION: the flat MB of FUNCTION in a go tool pprof -top -unit=MB listing.
flat() { awk -v f="$2" '$NF == f { sub(/MB$/, "", $1); print $1; exit }' "$1"; }

# The allocation agent's pod (agent.enabled, the app allocs.c): the init
# container's copy as the app container sees it, the app preloading it, and
# the user's heap workflow through the pod's port.
# agent_flow NAME PID CONTAINER (podprof's; the app's is POD-app)
agent_flow() {
	local n=$1 pid=$2 side=$3 app=${3%-podprof}-app apppid o=$OUT/$1
	apppid=$(cpid "$app")
	local so=/proc/$apppid/root/podprof-agent/libpodprof-alloc.so
	check "$n: the init container copied the image's agent into the emptyDir (same bytes, mode 0644, as the app sees it)" \
		eval '[ "$(stat -c %a "$so" 2>/dev/null)" = 644 ] && [ "$(sha256sum < "$so" | cut -d" " -f1)" = "$AGENT_SUM" ]'
	check "$n: the emptyDir is mounted read-only in the app container, and not in podprof's" \
		eval 'awk "\$5 == \"/podprof-agent\" { print \$6 }" /proc/$apppid/mountinfo | grep -Eq "(^|,)ro(,|\$)" &&
			! awk "{ print \$5 }" /proc/$pid/mountinfo | grep -qx /podprof-agent'
	check "$n: the app runs with LD_PRELOAD=/podprof-agent/libpodprof-alloc.so and PODPROF_ALLOC_RATE=65536, the agent loaded" \
		eval 'tr "\0" "\n" < /proc/$apppid/environ | grep -qx LD_PRELOAD=/podprof-agent/libpodprof-alloc.so &&
			tr "\0" "\n" < /proc/$apppid/environ | grep -qx PODPROF_ALLOC_RATE=65536 &&
			grep -q " /podprof-agent/libpodprof-alloc.so\$" /proc/$apppid/maps'
	check "$n: the app (allocs -a 16 -b 4) holds its memory (\"ready\")" wait_log "$app" '^ready$' 20
	# As the user runs it after kubectl port-forward: go tool pprof fetches the URL.
	in_net "$pid" go tool pprof -top -unit=MB http://127.0.0.1:8008/debug/pprof/heap > "$o.heap.top" 2> "$o.heap.err"
	check "$n: go tool pprof -top .../heap: inuse_space by allocation stacks, at the chart's rate (one sample per 65536 bytes)" \
		all_in "$o.heap.top" "Type: inuse_space" "allocation agent" "one sample per 65536 bytes"
	local alpha beta
	alpha=$(flat "$o.heap.top" keep_alpha) beta=$(flat "$o.heap.top" keep_beta)
	check "$n: heap names keep_alpha (${alpha:-?} MB of 16 MiB kept) and keep_beta (${beta:-?} MB of 4 MiB), within 50 %" \
		awk -v a="${alpha:-0}" -v b="${beta:-0}" 'BEGIN { exit !(a > 8.4 && a < 25.2 && b > 2.1 && b < 6.3) }'
	get "$pid" /debug/pprof/heap "$o.heap.pb.gz"
	go tool pprof -raw "$o.heap.pb.gz" > "$o.heap.raw" 2>&1
	check "$n: heap's stacks are in the app container's binary, /usr/local/bin/allocs (worker, keep_alpha)" \
		all_in "$o.heap.raw" /usr/local/bin/allocs " worker " " keep_alpha "
	get "$pid" "/debug/pprof/heap?debug=1" "$o.heap.txt"
	check "$n: heap?debug=1 is Go's heap text of the estimates (@ heap/2) naming keep_alpha" \
		eval '[ "$CODE" = 200 ] && head -n 1 "$o.heap.txt" | grep -q "^heap profile: .* @ heap/2$" && grep -q "keep_alpha" "$o.heap.txt"'
	# churn_gamma allocates thousands of times what the others keep: no node fraction.
	in_net "$pid" go tool pprof -top -nodefraction=0 -unit=MB http://127.0.0.1:8008/debug/pprof/allocs > "$o.allocs.top" 2> "$o.allocs.err"
	check "$n: go tool pprof -top .../allocs: alloc_space, naming churn_gamma, keep_alpha, keep_beta" \
		eval 'grep -q "Type: alloc_space" "$o.allocs.top" && [ -n "$(flat "$o.allocs.top" churn_gamma)" ] &&
			[ -n "$(flat "$o.allocs.top" keep_alpha)" ] && [ -n "$(flat "$o.allocs.top" keep_beta)" ]'
	in_net "$pid" go tool pprof -traces "http://127.0.0.1:8008/debug/pprof/heap?view=mappings" > "$o.mappings.traces" 2> "$o.mappings.err"
	check "$n: heap?view=mappings stays reachable: memory by mapping, the app's binary and the agent's file among it" \
		all_in "$o.mappings.traces" "Type: inuse_space" "by mapping" /usr/local/bin/allocs /podprof-agent/libpodprof-alloc.so
	get "$pid" /debug/pprof/ "$o.index.html"
	check "$n: the index links heap?view=mappings" eval '[ "$CODE" = 200 ] && grep -q "heap?view=mappings" "$o.index.html"'
}

# play_spec NAME VALUES-FILE [SECRET-TOKEN]: render the chart's example,
# play it, run the workflow, take it down.
play_spec() {
	local n=$1 values=$2 token=${3:-}
	local y=$OUT/$n.play.yaml
	{
		if [ -n "$token" ]; then
			printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s-token\ntype: Opaque\ndata:\n  token: %s\n---\n' \
				"$PREFIX" "$(printf '%s' "$token" | base64 -w0)"
		fi
		"$RENDER" -f "$values" --name "$PREFIX-$n" "$C"
	} > "$y.rendered" || { fail "$n: render the example Deployment"; return; }
	pass "$n: render the example Deployment"
	check "$n: the sidecar declares containerPort 8008" grep -q 'containerPort: 8008' "$y.rendered"
	# podman 4.3's kube play publishes every containerPort on the host, which
	# Kubernetes never does, and refuses ports with --network none: play a
	# copy without the ports lists (informational in Kubernetes).
	# The switch's ConfigMap: podman cannot update one in place as the kubelet
	# does, so the test plays it as a directory of its own, updated the
	# kubelet's way (a new ..data directory swapped in by a rename).
	local sw=$OUT/$n.switch
	if grep -q "name: $PREFIX-switch" "$y.rendered"; then
		rm -rf "$sw" && mkdir -p "$sw" && set_switch "$sw" true
		without_ports < "$y.rendered" |
			sed "s#^\( *\)configMap:\$#\1hostPath:#; s#^\( *\)name: $PREFIX-switch\$#\1path: $sw#" > "$y"
	else
		without_ports < "$y.rendered" > "$y"
	fi
	# podman 4.3 restarts a finished init container under the pod's
	# restartPolicy (Always, a Deployment's), which Kubernetes never does,
	# and then often fails to remove it ("failed to remove once init
	# container ... it is running"): play pods with init containers with
	# OnFailure, which no other container here reaches (none exits).
	if grep -q '^ *initContainers:$' "$y"; then
		sed -i 's/^\( *\)shareProcessNamespace: true$/&\n\1restartPolicy: OnFailure/' "$y"
	fi
	podman kube play --network none "$y" > "$OUT/$n.play.log" 2>&1
	local pod
	pod=$(podman pod ps --format '{{.Name}}' | grep "^$PREFIX-$n" | head -n 1)
	if [ -z "$pod" ]; then
		fail "$n: podman kube play" "$(grep -v 'level=error msg=".*systemd' "$OUT/$n.play.log" | tail -n 5)"
		return
	fi
	pass "$n: podman kube play --network none (pod $pod)"
	local side=$pod-podprof app=$pod-app
	if ! wait_log "$side" 'serving http' 20; then
		fail "$n: podprof starts in the pod"; podman kube down "$y" > /dev/null 2>&1; return
	fi
	pass "$n: podprof starts in the pod and picks the app by itself"
	local pid apppid
	pid=$(cpid "$side") apppid=$(cpid "$app")
	podman logs "$side" > "$OUT/$n.podprof.log" 2>&1
	check "$n: podprof runs as uid 65532, not 0" [ "$(status_field "$pid" Uid | awk '{ print $2 }')" = 65532 ]
	check "$n: podprof's effective capabilities: CAP_SYS_PTRACE" has_cap "$pid" 19
	check "$n: no capability warning at start-up" sh -c "! grep -q 'lacks CAP_SYS_PTRACE' '$OUT/$n.podprof.log'"
	check "$n: podprof profiles the app's process (pid $apppid in the pod's namespace)" \
		grep -q "profiling pid $(status_field "$apppid" NSpid | awk '{ print $NF }');" "$OUT/$n.podprof.log"
	check "$n: the pod shares one PID namespace" [ "$(readlink /proc/$pid/ns/pid)" = "$(readlink /proc/$apppid/ns/pid)" ]
	check "$n: root filesystem is read-only" sh -c "podman inspect '$side' --format '{{.HostConfig.ReadonlyRootfs}}' | grep -q true"
	if grep -q 'SYS_NICE' "$y"; then
		check "$n: the sampler thread runs at nice -10 (SYS_NICE)" [ "$(sampler_nice "$pid")" = -10 ]
	else
		check "$n: without SYS_NICE podprof says so and samples at nice 0" \
			sh -c "grep -q 'sampler runs at nice 0' '$OUT/$n.podprof.log' && [ '$(sampler_nice "$pid")' = 0 ]"
	fi
	if [ -n "$token" ]; then
		# podman 4.3 writes a kube Secret's value still base64-encoded into
		# the volume; the token is whatever the mounted file holds.
		local tok
		tok=$(head -n 1 "/proc/$pid/root/run/secrets/podprof/token" 2>/dev/null)
		check "$n: the token Secret is mounted where --auth-token-file points" [ -n "$tok" ]
		get "$pid" /debug/pprof/cmdline "$OUT/$n.noauth"
		check "$n: without the token: 401" [ "$CODE" = 401 ]
		check "$n: probes on /healthz are rendered (listen :8008)" grep -q 'path: /healthz' "$y"
		workflow "$n" "$pid" "$side" -H "Authorization: Bearer $tok"
	else
		check "$n: no probes when listening on loopback (the kubelet probes the pod IP)" \
			sh -c "! grep -q livenessProbe '$y'"
		"${FLOW:-workflow}" "$n" "$pid" "$side"
	fi
	[ -d "$sw" ] && switch_flip "$n" "$pid" "$side" "$sw"
	podman logs "$side" > "$OUT/$n.podprof.log" 2>&1
	podman kube down "$y" > "$OUT/$n.down.log" 2>&1
	check "$n: podman kube down removes the pod" \
		sh -c "! podman pod exists '$pod' && ! podman container exists '$side' && ! podman container exists '$app'"
	rm -f "$y"
}

cat > "$OUT/values-ptrace.yaml" <<EOF
image: {repository: localhost/podprof, tag: e2e, pullPolicy: Never}
security: {sysNice: false}
switch: {configMap: $PREFIX-switch}
example:
  enabled: true
  app: {image: "$APP", securityContext: {runAsUser: 65532, runAsGroup: 65532}}
EOF
cat > "$OUT/values-ptrace-nice.yaml" <<EOF
image: {repository: localhost/podprof, tag: e2e, pullPolicy: Never}
listen: {host: ""}
auth: {existingSecret: $PREFIX-token}
security: {sysNice: true}
log: {format: json}
example:
  enabled: true
  app: {image: "$APP", securityContext: {runAsUser: 65532, runAsGroup: 65532}}
EOF

# The allocation agent (agent.enabled), with allocs.c as the app's command.
cat > "$OUT/values-agent.yaml" <<EOF
image: {repository: localhost/podprof, tag: e2e, pullPolicy: Never}
security: {sysNice: false}
agent: {enabled: true, rate: 65536}
example:
  enabled: true
  app:
    image: "$APP"
    command: [/usr/local/bin/allocs]
    args: ["-t", "1", "-a", "16", "-b", "4"]
    securityContext: {runAsUser: 65532, runAsGroup: 65532}
EOF

phase "pod spec: SYS_PTRACE"
play_spec ptrace "$OUT/values-ptrace.yaml"
phase "pod spec: SYS_PTRACE + SYS_NICE, token"
play_spec ptrace-nice "$OUT/values-ptrace-nice.yaml" "e2e-$RANDOM$RANDOM"
phase "pod spec: allocation agent"
FLOW=agent_flow play_spec agent "$OUT/values-agent.yaml"

# ---------------------------------------------------------------------------
phase "ephemeral container"
# A running application (a pod without podprof), then podprof joined to its
# PID and network namespaces, as kubectl debug --target=app --profile=general.
# The application runs as podprof's uid (see "root-owned target" below).
podman run -d --name "$PREFIX-app" --user 65532:65532 --network none "$APP" > /dev/null
app_pid=$(cpid "$PREFIX-app")
EPH=$PREFIX-debug
podman run -d --name "$EPH" --pid="container:$PREFIX-app" --network="container:$PREFIX-app" \
	--cap-drop ALL --cap-add SYS_PTRACE "$IMG" > /dev/null
if wait_log "$EPH" 'serving http' 20; then
	pass "ephemeral: podprof joined to the running app starts"
	pid=$(cpid "$EPH")
	check "ephemeral: podprof runs as uid 65532" [ "$(status_field "$pid" Uid | awk '{ print $2 }')" = 65532 ]
	workflow ephemeral "$pid" "$EPH"
	# Ended as kubectl debug -it ends it (Ctrl-C): podprof lets go and
	# exits 0; the app runs on, the same process, untraced.
	podman kill --signal INT "$EPH" > /dev/null 2>&1
	code=$(podman wait "$EPH" 2>/dev/null)
	check "ephemeral: podprof ends on SIGINT (Ctrl-C) with status 0 (got $code)" [ "$code" = 0 ]
	check "ephemeral: the app was not restarted (pid $app_pid before and after) and runs untraced" \
		eval '[ "$(cpid "$PREFIX-app")" = "$app_pid" ] && [ "$(status_field "$app_pid" TracerPid)" = 0 ]'
else
	fail "ephemeral: podprof joined to the running app starts"
fi
podman rm -f -t 0 "$EPH" > /dev/null 2>&1

# A pod of several processes: the app container runs a pre-fork server (its
# master is the namespace's PID 1, two workers recycled every second), and
# podprof joined to it (--tree: without it the master and its workers are
# several candidates, refused) takes them all with pid=all, the workers
# forked during the window included.
phase "several processes"
podman run -d --name "$PREFIX-prefork" --user 65532:65532 --network none --entrypoint /usr/local/bin/prefork \
	"$APP" -w 2 -l 1000 > /dev/null
MP=$PREFIX-multi
podman run -d --name "$MP" --pid="container:$PREFIX-prefork" --network="container:$PREFIX-prefork" \
	--cap-drop ALL --cap-add SYS_PTRACE "$IMG" --tree > /dev/null
if wait_log "$MP" 'serving http' 20; then
	pid=$(cpid "$MP")
	get "$pid" "/debug/pprof/profile?seconds=3&pid=all" "$OUT/multi.pb.gz"
	go tool pprof -tags "$OUT/multi.pb.gz" > "$OUT/multi.tags" 2>&1
	go tool pprof -top "$OUT/multi.pb.gz" > "$OUT/multi.top" 2>&1
	npids=$(awk '/^ *pid:/ { on = 1; next } /^ *[a-z]+:/ { on = 0 } on && /%\)/' "$OUT/multi.tags" | wc -l)
	check "several processes: profile?pid=all is one profile of the master and its workers ($npids pids)" \
		eval '[ "$CODE" = 200 ] && [ "$npids" -ge 4 ]'
	check "several processes: labelled process prefork, worker_spin on top" \
		eval 'grep -q "): prefork$" "$OUT/multi.tags" && grep -q "worker_spin" "$OUT/multi.top"'
	get "$pid" "/debug/pprof/goroutine?debug=2&pid=all" "$OUT/multi.dump"
	check "several processes: goroutine?debug=2&pid=all lists PID 1 (the master) in master_wait" \
		eval '[ "$CODE" = 200 ] && grep -q "^process 1 (prefork):" "$OUT/multi.dump" && grep -q "^master_wait(" "$OUT/multi.dump"'
	get "$pid" "/debug/pprof/trace?seconds=1&pid=all" "$OUT/multi.trace"
	HOME=$OUT go tool trace -d "$OUT/multi.trace" > "$OUT/multi.trace.txt" 2>&1
	check "several processes: trace?pid=all opens in go tool trace, the master's thread named with its process" \
		eval '[ "$CODE" = 200 ] && grep -q "GoCreate" "$OUT/multi.trace.txt" && grep -qa "thread prefork of prefork (pid 1)" "$OUT/multi.trace"'
	get "$pid" "/debug/pprof/heap?pid=all&debug=1" "$OUT/multi.heap"
	heap_pids=$(awk 'NR > 1 && $1 != "all" { print $1 }' "$OUT/multi.heap" | sort -u | wc -l)
	check "several processes: heap?pid=all&debug=1 has rows of PID 1 and of its workers ($heap_pids pids)" \
		eval '[ "$CODE" = 200 ] && [ "$heap_pids" -ge 3 ] && grep -q "^1 " "$OUT/multi.heap"'
else
	fail "several processes: podprof joined to the pre-fork app starts"
fi
podman rm -f -t 0 "$MP" "$PREFIX-prefork" > /dev/null 2>&1

# A root-owned target. The kernel lets only a process's owner read
# /proc/<tid>/syscall (mode 0400, no CAP_DAC_OVERRIDE here), which the sampler
# reads to see which threads run: the root model (uid 0 + SYS_PTRACE) profiles
# it; a non-root podprof tells running threads from /proc/<tid>/stat instead
# (pt_thread_stat_only), and must sample it too.
podman run -d --name "$PREFIX-rootapp" --network none "$APP" > /dev/null
# root_ep NAME [podman run options]: podprof joined to the root-owned app;
# prints the number of CPU samples in 2 s.
root_ep() {
	local n=$1; shift
	podman run -d --name "$PREFIX-$n" --pid="container:$PREFIX-rootapp" --network="container:$PREFIX-rootapp" \
		--cap-drop ALL --cap-add SYS_PTRACE "$@" "$IMG" > /dev/null
	wait_log "$PREFIX-$n" 'serving http' 20 > /dev/null || { echo 0; return; }
	get "$(cpid "$PREFIX-$n")" "/debug/pprof/profile?seconds=2" "$OUT/$n.pb.gz"
	go tool pprof -raw "$OUT/$n.pb.gz" 2>/dev/null | awk '/^Samples/ { s = 1; getline; next } /^Locations/ { s = 0 } s && NF' | wc -l
	podman rm -f -t 0 "$PREFIX-$n" > /dev/null 2>&1
}
samples=$(root_ep rootmodel --user 0)
check "root model (uid 0 + SYS_PTRACE): samples a root-owned app ($samples stacks)" [ "$samples" -gt 0 ]
samples=$(root_ep nonroot-rootapp)
check "nonRoot model: samples a root-owned app ($samples stacks)" [ "$samples" -gt 0 ]

# ---------------------------------------------------------------------------
phase "kubernetes capability semantics"
# k8s_run NAME APP CAPS [--no-new-privs]: podprof as Kubernetes starts a
# non-root container: uid 65532, the pod's added capabilities in the bounding
# set only (no ambient ones, unlike podman). The first setpriv switches user
# and bounding set; the second exec starts from an empty permitted set (as
# runtimes that clear a non-root process's permitted set do: the strict case
# for no_new_privs) and sets no_new_privs when asked.
k8s_run() {
	local n=$1 app=$2 caps=$3; shift 3
	local bset
	bset=$(echo "$caps" | tr 'A-Z,' 'a-z\n' | sed 's/^/+/' | paste -sd,)
	podman rm -f -t 0 "$PREFIX-$n" > /dev/null 2>&1
	podman run -d --name "$PREFIX-$n" --pid="container:$app" --network="container:$app" \
		--user 0 --cap-drop ALL --cap-add "$caps,SETUID,SETGID,SETPCAP" --entrypoint /usr/bin/setpriv "$IMG" \
		--reuid=65532 --regid=65532 --clear-groups --inh-caps=-all --bounding-set="-all,$bset" \
		-- /usr/bin/setpriv --inh-caps=-all "$@" -- /usr/local/bin/podprof > /dev/null
}
k8s_run k8s-ptrace "$PREFIX-app" SYS_PTRACE
if wait_log "$PREFIX-k8s-ptrace" 'serving http' 20; then
	pid=$(cpid "$PREFIX-k8s-ptrace")
	check "k8s SYS_PTRACE: execve works although the file also has cap_sys_nice (permitted-only)" true
	check "k8s SYS_PTRACE: no ambient capabilities, bounding set SYS_PTRACE" \
		[ "$(status_field "$pid" CapAmb)" = 0000000000000000 -a "$(status_field "$pid" CapBnd)" = 0000000000080000 ]
	check "k8s SYS_PTRACE: the file capability gives CAP_SYS_PTRACE, podprof raises it" has_cap "$pid" 19
	get "$pid" "/debug/pprof/profile?seconds=2" "$OUT/k8s-ptrace.pb.gz"
	go tool pprof -raw "$OUT/k8s-ptrace.pb.gz" > "$OUT/k8s-ptrace.raw" 2>&1
	check "k8s SYS_PTRACE: the CPU profile names hot_a" eval '[ "$CODE" = 200 ] && grep -q " hot_a " "$OUT/k8s-ptrace.raw"'
else
	fail "k8s SYS_PTRACE: podprof starts with cap_sys_ptrace,cap_sys_nice+p and SYS_PTRACE alone"
fi
podman rm -f -t 0 "$PREFIX-k8s-ptrace" > /dev/null 2>&1
k8s_run k8s-nice "$PREFIX-app" SYS_PTRACE,SYS_NICE
if wait_log "$PREFIX-k8s-nice" 'serving http' 20; then
	pid=$(cpid "$PREFIX-k8s-nice")
	check "k8s SYS_PTRACE+SYS_NICE: CAP_SYS_PTRACE effective" has_cap "$pid" 19
	check "k8s SYS_PTRACE+SYS_NICE: the sampler runs at nice -10" [ "$(sampler_nice "$pid")" = -10 ]
	check "k8s SYS_PTRACE+SYS_NICE: CAP_SYS_NICE dropped once used" lacks_cap "$pid" 23
else
	fail "k8s SYS_PTRACE+SYS_NICE: podprof starts"
fi
podman rm -f -t 0 "$PREFIX-k8s-nice" > /dev/null 2>&1
# The perf_event backend in a container (README, "Two ways of sampling"):
# with PERFMON and no seccomp filter (Kubernetes' default, Unconfined),
# podprof samples without stopping a thread; with PERFMON under this
# Podman's default profile, which allows perf_event_open only with
# SYS_ADMIN (as containerd's did before 2022), --backend auto samples with
# ptrace and says why, in its log and in the profile.
perf_ep() {
	local n=$1; shift
	podman rm -f -t 0 "$PREFIX-$n" > /dev/null 2>&1
	podman run -d --name "$PREFIX-$n" --pid="container:$PREFIX-app" --network="container:$PREFIX-app" \
		--user 65532:65532 --cap-drop ALL --cap-add SYS_PTRACE,PERFMON "$@" "$IMG" > /dev/null
}
perf_ep perf-unconfined --security-opt seccomp=unconfined
if wait_log "$PREFIX-perf-unconfined" 'serving http' 20; then
	pid=$(cpid "$PREFIX-perf-unconfined")
	check "PERFMON, no seccomp filter: CAP_PERFMON kept, CAP_SYS_PTRACE too" eval 'has_cap "$pid" 38 && has_cap "$pid" 19'
	get "$pid" "/debug/pprof/profile?seconds=2" "$OUT/perf-unconfined.pb.gz"
	go tool pprof -raw "$OUT/perf-unconfined.pb.gz" > "$OUT/perf-unconfined.raw" 2>&1
	check "PERFMON, no seccomp filter: sampled with perf_event (the comment says so), hot_a named" \
		eval '[ "$CODE" = 200 ] && grep -q "taken with perf_event" "$OUT/perf-unconfined.raw" && grep -q " hot_a " "$OUT/perf-unconfined.raw"'
	get "$pid" "/metrics" "$OUT/perf-unconfined.metrics"
	check "PERFMON, no seccomp filter: no thread stopped for the profile, samples read from the rings" \
		eval 'grep -q "^podprof_stops_total 0$" "$OUT/perf-unconfined.metrics" && grep -qE "^podprof_perf_samples_total [1-9]" "$OUT/perf-unconfined.metrics"'
else
	fail "PERFMON, no seccomp filter: podprof starts"
fi
podman rm -f -t 0 "$PREFIX-perf-unconfined" > /dev/null 2>&1
perf_ep perf-seccomp
if wait_log "$PREFIX-perf-seccomp" 'serving http' 20; then
	pid=$(cpid "$PREFIX-perf-seccomp")
	podman logs "$PREFIX-perf-seccomp" > "$OUT/perf-seccomp.log" 2>&1
	check "PERFMON under Podman's default seccomp profile: auto says ptrace and why" \
		grep -q 'backend: auto (ptrace): perf_event_open refused: Operation not permitted' "$OUT/perf-seccomp.log"
	get "$pid" "/debug/pprof/profile?seconds=2" "$OUT/perf-seccomp.pb.gz"
	go tool pprof -raw "$OUT/perf-seccomp.pb.gz" > "$OUT/perf-seccomp.raw" 2>&1
	check "PERFMON under Podman's default seccomp profile: the profile says ptrace and why, hot_a named" \
		eval '[ "$CODE" = 200 ] && grep -q "taken with ptrace" "$OUT/perf-seccomp.raw" && grep -q "backend ptrace: perf_event_open refused" "$OUT/perf-seccomp.raw" && grep -q " hot_a " "$OUT/perf-seccomp.raw"'
else
	fail "PERFMON under Podman's default seccomp profile: podprof starts"
fi
podman rm -f -t 0 "$PREFIX-perf-seccomp" > /dev/null 2>&1
# allowPrivilegeEscalation: false sets no_new_privs: the kernel ignores file
# capabilities, and podprof must say so on its first line. The root-owned app:
# a target of podprof's own uid needs no capability at all where Yama is
# absent or its ptrace_scope is 0 (as here).
k8s_run k8s-nnp "$PREFIX-rootapp" SYS_PTRACE --no-new-privs
if wait_log "$PREFIX-k8s-nnp" 'serving http' 20; then
	pid=$(cpid "$PREFIX-k8s-nnp")
	podman logs "$PREFIX-k8s-nnp" > "$OUT/k8s-nnp.log" 2>&1
	check "k8s no_new_privs: the first log line says CAP_SYS_PTRACE is missing" \
		sh -c "head -n 1 '$OUT/k8s-nnp.log' | grep -q 'lacks CAP_SYS_PTRACE.*allowPrivilegeEscalation'"
	get "$pid" "/debug/pprof/profile?seconds=1" "$OUT/k8s-nnp.body"
	check "k8s no_new_privs: a profile is a 500 naming the capability" \
		eval '[ "$CODE" = 500 ] && grep -q CAP_SYS_PTRACE "$OUT/k8s-nnp.body"'
else
	fail "k8s no_new_privs: podprof starts"
fi
podman rm -f -t 0 "$PREFIX-k8s-nnp" "$PREFIX-app" "$PREFIX-rootapp" > /dev/null 2>&1

finish
