# podprof's image: a build stage with the build dependencies, a runtime stage
# with the runtime libraries, libc6-dbg, the binary and the allocation agent
# (no compiler, no extra tools). Both stages install from scripts/packages.txt,
# the one list.
#   podman build --network=host -t podprof .
#   (no registry here: tests/e2e/run.sh builds on a local debootstrap image
#    with --build-arg BASE=localhost/debian:bookworm-slim)
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS build
# The commit for --version (no .git in the build context).
ARG GIT_REV=unknown
WORKDIR /src
COPY scripts/packages.txt scripts/packages.txt
# The [build] section, and [image-build] (setcap).
RUN pkgs=$(sed -n '/^# \[build\]/,/^# \[/{/^[^#]/p}; /^# \[image-build\]/,/^# \[/{/^[^#]/p}' \
		scripts/packages.txt | cut -d' ' -f1) \
	&& test -n "$pkgs" \
	&& apt-get update -qq \
	&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs \
	&& rm -rf /var/lib/apt/lists/*
COPY . .
# Permitted-only file capabilities (no +e): with the effective bit, execve
# fails with EPERM in a container whose bounding set lacks one of them (a pod
# that adds SYS_PTRACE but not SYS_NICE); podprof raises what it is allowed
# into its effective set itself. PERFMON and IPC_LOCK serve the perf_event
# backend, where the pod adds them (the chart's perfEvent.enabled). COPY keeps
# the security.capability xattr.
RUN make -j"$(nproc)" GIT_REV="$GIT_REV" all \
	&& install -D -m 0755 build/release/podprof /out/podprof \
	&& install -D -m 0644 build/release/libpodprof-alloc.so /out/libpodprof-alloc.so \
	&& setcap cap_sys_ptrace,cap_sys_nice,cap_perfmon,cap_ipc_lock+p /out/podprof \
	&& getcap /out/podprof | grep -q 'cap_ipc_lock,cap_sys_ptrace,cap_sys_nice,cap_perfmon=p'

FROM ${BASE}
COPY scripts/packages.txt /tmp/packages.txt
RUN pkgs=$(sed -n '/^# \[runtime\]/,/^# \[/{/^[^#]/p}' /tmp/packages.txt | cut -d' ' -f1) \
	&& test -n "$pkgs" \
	&& apt-get update -qq \
	&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs \
	&& rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /tmp/packages.txt \
	&& find / -xdev -type f -perm /6000 -exec chmod a-s {} + \
	&& groupadd --gid 65532 podprof \
	&& useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin podprof
# No setuid binaries (the chart's nonRoot model allows privilege escalation
# for the file capabilities); the only file capabilities are podprof's.
COPY --from=build /out/podprof /usr/local/bin/podprof
# The allocation agent, for the application container, not for podprof: the
# chart's agent.enabled copies it into an emptyDir the application preloads
# (LD_PRELOAD=/podprof-agent/libpodprof-alloc.so). Root's, mode 0644: any uid
# reads it, none writes it. It needs glibc >= 2.17 in the application.
COPY --from=build /out/libpodprof-alloc.so /usr/lib/podprof/libpodprof-alloc.so
USER 65532:65532
EXPOSE 8008
# The default listen address stays 127.0.0.1:8008 (kubectl port-forward
# reaches loopback); set PODPROF_LISTEN=:8008 for scrapers in other pods.
ENTRYPOINT ["/usr/local/bin/podprof"]
