"""What operators plug into: /metrics held to promtool, /healthz and /readyz,
the Knative-style switch file, JSON log lines."""
import json
import os
import re
import shutil
import subprocess
import threading
import time

import lib
from lib import *  # noqa: F401,F403  (Fixture, Podprof, http, check, test, ...)
from lib import podprof_pid  # noqa: F401


def promtool():
    path = shutil.which("promtool")
    if not path:
        raise Skip("promtool not installed (Debian package prometheus, scripts/packages.txt)")
    return path


@test
def metrics_pass_promtool_check():
    """After a profile (every counter, summary and quantile has a value),
    promtool check metrics prints nothing: no error, no lint warning."""
    tool = promtool()
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid))
    st, h, body = http(pp.port, "/debug/pprof/profile?seconds=1")
    check(st == 200, "profile: %d %r" % (st, body[:200]))
    st, h, body = http(pp.port, "/metrics")
    check(st == 200, "metrics: %d" % st)
    r = subprocess.run([tool, "check", "metrics"], input=body, capture_output=True, timeout=30)
    out = (r.stdout + r.stderr).decode()
    check(r.returncode == 0 and not out.strip(), "promtool (rc %d):\n%s" % (r.returncode, out))
    text = body.decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            values[k] = float(v)
    for name in ("podprof_pause_seconds_sum", "podprof_pause_seconds_count",
                 'podprof_pause_seconds{quantile="0.99"}', "podprof_unwind_seconds_sum",
                 "podprof_unwind_seconds_count", 'podprof_unwind_seconds{quantile="0.5"}',
                 "process_cpu_seconds_total", "process_resident_memory_bytes",
                 "process_open_fds", "process_start_time_seconds", "podprof_stops_total"):
        check(name in values, "metrics lack %s:\n%s" % (name, text))
    check("podprof_pause_seconds_total" not in values, "the old colliding counter is still there")
    check(values["podprof_pause_seconds_count"] == values["podprof_thread_samples_total"] > 0,
          "pause count %s" % values)
    check(values["podprof_unwind_seconds_sum"] > 0 and values["process_open_fds"] > 2, "values %s" % values)
    # The start time is podprof's, within a minute of now by the same clock.
    with open("/proc/uptime") as fh:
        up = float(fh.read().split()[0])
    check(abs(values["process_start_time_seconds"] - (time.time() - pp_age(pp, up))) < 60,
          "start time %s" % values["process_start_time_seconds"])
    m = re.search(r'^podprof_build_info\{version="([^"]+)",revision="([^"]+)"\} 1$', text, re.M)
    with open(os.path.join(lib.ROOT, "VERSION")) as fh:
        version = fh.read().strip()
    check(m and m.group(1) == version, "build_info %r, VERSION %s" % (m and m.group(0), version))
    pp.stop(), f.stop()


def pp_age(pp, uptime):
    """Seconds podprof has run, from its /proc stat (start in ticks since boot)."""
    with open("/proc/%d/stat" % podprof_pid(pp)) as fh:
        s = fh.read()
    start = int(s[s.rindex(")") + 2:].split()[19]) / os.sysconf("SC_CLK_TCK")
    return uptime - start


@test
def healthz_says_when_the_target_is_gone():
    """200 ok (and /readyz too) while the target lives; once it is killed,
    503 naming it, without a token (public) even when one is required."""
    f = Fixture()
    tok = os.path.join(lib.TMP, "token")
    with open(tok, "w") as fh:
        fh.write("s3cret\n")
    pp = Podprof("--pid", str(f.pid), "--auth-token-file", tok)
    for path in ("/healthz", "/readyz"):
        st, h, body = http(pp.port, path)
        check(st == 200 and body == b"ok\n", "%s: %d %r" % (path, st, body))
    f.proc.kill()
    f.proc.wait()   # reaped: /proc/<pid> is gone
    for path in ("/healthz", "/readyz"):
        st, h, body = http(pp.port, path)
        check(st == 503 and body == b"target process %d is gone\n" % f.pid,
              "%s after the kill: %d %r" % (path, st, body))
    pp.stop()


@test
def healthz_says_when_podprof_may_not_trace():
    """podprof as another user than the target, without CAP_SYS_PTRACE:
    503 'podprof lacks CAP_SYS_PTRACE'."""
    if os.geteuid() != 0:
        raise Skip("needs root to run podprof as another user")
    f = Fixture()
    pp = Podprof("--pid", str(f.pid), prefix=("setpriv", "--reuid", "65534", "--regid", "65534",
                                              "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"))
    st, h, body = http(pp.port, "/healthz")
    check(st == 503 and body.startswith(b"podprof lacks CAP_SYS_PTRACE"), "healthz: %d %r" % (st, body))
    pp.stop(), f.stop()


class ConfigMapDir:
    """A directory laid out as the kubelet mounts a ConfigMap: the key is a
    symlink through "..data", itself a symlink to a timestamped directory;
    an update writes a new directory and renames a new "..data" over the
    old one (atomic), as the kubelet's AtomicWriter does."""

    def __init__(self, key, value):
        self.dir = os.path.join(lib.TMP, "cm-%d" % len(os.listdir(lib.TMP)))
        os.mkdir(self.dir)
        self.key = key
        self.n = 0
        self.set(value)
        os.symlink(os.path.join("..data", key), os.path.join(self.dir, key))
        self.path = os.path.join(self.dir, key)

    def set(self, value):
        self.n += 1
        ts = os.path.join(self.dir, "..ts_%d" % self.n)
        os.mkdir(ts)
        with open(os.path.join(ts, self.key), "wb") as fh:
            fh.write(value)
        tmp = os.path.join(self.dir, "..data_tmp")
        os.symlink(os.path.basename(ts), tmp)
        os.rename(tmp, os.path.join(self.dir, "..data"))

    def remove(self):
        """The key gone from the ConfigMap: the new data has no such file."""
        self.set_files({})

    def set_files(self, files):
        self.n += 1
        ts = os.path.join(self.dir, "..ts_%d" % self.n)
        os.mkdir(ts)
        for k, v in files.items():
            with open(os.path.join(ts, k), "wb") as fh:
                fh.write(v)
        tmp = os.path.join(self.dir, "..data_tmp")
        os.symlink(os.path.basename(ts), tmp)
        os.rename(tmp, os.path.join(self.dir, "..data"))


def tracer_of(pid):
    """The process tracing pid (TracerPid names the tracer thread), or 0."""
    tid = tracer_pid(pid)
    if not tid:
        return 0
    with open("/proc/%d/status" % tid) as fh:
        return int(re.search(r"^Tgid:\s+(\d+)", fh.read(), re.M).group(1))


def pprof_404(pp, path):
    st, h, body = http(pp.port, path)
    return st == 404 and body == b"404 page not found\n" and "x-go-pprof" not in h


@test
def switch_file_turns_profiling_off_and_on():
    """--enable-file names a ConfigMap key: 'false' makes every /debug/pprof
    path answer Go's plain 404, cancels a running profile (404 too) and
    detaches the target (the continuous watch included); /healthz and
    /metrics keep answering; 'true' brings it all back. Bad contents and a
    missing key keep the state, said once per change."""
    f = Fixture(threads=2)
    cm = ConfigMapDir("profiling.enable", b"true\n")
    pp = Podprof("--pid", str(f.pid), "--enable-file", cm.path, "--continuous")
    me = podprof_pid(pp)
    pp.wait_log(r"switch: profiling enabled by " + re.escape(cm.path), 5)
    pp.wait_log(r"ptrace: attached pid=%d" % f.pid, 5)
    check(tracer_of(f.pid) == me, "not traced by podprof")
    check(http(pp.port, "/debug/pprof/cmdline")[0] == 200, "cmdline while enabled")

    # A CPU profile runs when the switch goes off: it ends with a 404.
    result = {}
    t = threading.Thread(target=lambda: result.update(r=http(pp.port, "/debug/pprof/profile?seconds=30")))
    t.start()
    pp.wait_log(r"profile: started pid=%d seconds=30" % f.pid, 5)
    n = len(pp.lines)
    cm.set(b"false")
    pp.wait_log(r"switch: profiling disabled by " + re.escape(cm.path), 5, start=n)
    t.join(10)
    check(not t.is_alive() and result["r"][0] == 404 and result["r"][2] == b"404 page not found\n",
          "the running profile: %r" % (result.get("r", ("still running",))[:1],))
    for path in ("/debug/pprof/", "/debug/pprof", "/debug/pprof/profile?seconds=1",
                 "/debug/pprof/goroutine?debug=2", "/debug/pprof/heap", "/debug/pprof/nonesuch"):
        check(pprof_404(pp, path), "%s while disabled: %r" % (path, http(pp.port, path)[:3:2]))
    check(http(pp.port, "/healthz")[:3:2] == (200, b"ok\n"), "healthz while disabled")
    check(http(pp.port, "/metrics")[0] == 200, "metrics while disabled")
    pp.wait_log(r"ptrace: detached pid=%d" % f.pid, 5, start=n)
    check(tracer_pid(f.pid) == 0, "still traced while disabled: TracerPid %d" % tracer_pid(f.pid))

    # Bad words and a missing key keep it off, each said once.
    n = len(pp.lines)
    cm.set(b"maybe\n")
    pp.wait_log(r"switch: .*it says 'maybe', not true, false, enabled or disabled; profiling stays disabled", 5,
                start=n)
    cm.remove()
    pp.wait_log(r"switch: .*cannot read it \(it is missing\); profiling stays disabled", 5, start=n)
    check(pprof_404(pp, "/debug/pprof/cmdline"), "enabled by a missing file")
    check(tracer_pid(f.pid) == 0, "attached while disabled")

    # Knative 1.19's key, runtime-profiling, says enabled or disabled.
    n2 = len(pp.lines)
    cm.set(b"  enabled \n")
    pp.wait_log(r"switch: profiling enabled by " + re.escape(cm.path), 5, start=n2)
    check(http(pp.port, "/debug/pprof/cmdline")[0] == 200, "cmdline once enabled again")
    pp.wait_log(r"ptrace: attached pid=%d" % f.pid, 5, start=n2)   # the watch is back
    check(tracer_of(f.pid) == me, "the continuous watch did not attach again")
    st, h, body = http(pp.port, "/debug/pprof/goroutine?debug=1")
    check(st == 200 and b"goroutine profile:" in body, "goroutine once enabled: %d %r" % (st, body[:100]))
    bad = [l for l in pp.lines[n:] if l and "switch:" in l and "stays" in l]
    check(len(bad) == 2, "a bad look is said once per change, not every second: %s" % bad)
    pp.stop(), f.stop()


@test
def switch_file_false_at_start_never_attaches():
    """A file that says false at start: 404 from the first request, the
    target never attached (even with --continuous); a missing file at start
    means enabled, and says so."""
    f = Fixture()
    cm = ConfigMapDir("profiling.enable", b"false")
    pp = Podprof("--pid", str(f.pid), "--enable-file", cm.path, "--continuous")
    pp.wait_log(r"switch: profiling disabled by ", 5)
    check(pprof_404(pp, "/debug/pprof/profile?seconds=1"), "profile at start")
    check(tracer_pid(f.pid) == 0 and "ptrace: attached" not in pp.log(), "attached while disabled")
    pp.stop()
    pp = Podprof("--pid", str(f.pid), "--enable-file", os.path.join(lib.TMP, "nonesuch"))
    pp.wait_log(r"switch: .*nonesuch: cannot read it \(it is missing\); profiling stays enabled", 5)
    check(http(pp.port, "/debug/pprof/cmdline")[0] == 200, "a missing file at start: enabled")
    pp.stop(), f.stop()


@test
def json_log_lines_stay_json_whatever_the_names():
    """Targets whose executable path and comm hold a byte that is not UTF-8,
    quotes, a backslash and multi-byte characters, listed by podprof's error
    (two match --exe): every stderr line is UTF-8 and parses with
    json.loads, though the message is cut (paths of over 1000 bytes), and
    the cut never leaves half a character."""
    euro = "\u20ac".encode()
    for pad in range(3):   # the cut falls at each byte of a 3-byte character once
        top = os.path.join(lib.TMP.encode(), b"json%d" % pad, b"x" * pad)
        d = top
        for i in range(5):
            d = os.path.join(d, euro * 70)
        os.makedirs(d)
        exe = os.path.join(d, b'\xffq"uo\\te' + euro * 3 + b"ppjsonmark")
        shutil.copy(lib.BUSY, exe)
        fixtures = [Fixture(exe=exe.decode(errors="surrogateescape")) for _ in range(2)]
        r = subprocess.run([lib.PODPROF, "--log-format", "json", "--exe", "ppjsonmark",
                            "--listen", "127.0.0.1:0"], capture_output=True, timeout=30)
        check(r.returncode == 1, "podprof with two candidates: rc %d" % r.returncode)
        lines = r.stderr.split(b"\n")
        check(lines[-1] == b"" and len(lines) >= 2, "stderr %r" % r.stderr[:200])
        msgs = []
        for raw in lines[:-1]:
            try:
                obj = json.loads(raw.decode("utf-8"))   # strict: any bad byte fails
            except ValueError as e:
                raise AssertionError("not JSON (%s): %r" % (e, raw[:300]))
            msgs.append(obj["msg"])
        listing = [m for m in msgs if "processes match" in m]
        check(listing, "no candidate listing in %r" % msgs)
        m = listing[0]
        check('\ufffdq"uo\\te\u20ac\u20ac\u20acppjsonmark' in m, "exe not escaped faithfully: %r" % m[:400])
        check(len(m.encode()) > 1900 and not m.endswith("\ufffd"), "the cut: %d bytes, ends %r"
              % (len(m.encode()), m[-10:]))
        for fx in fixtures:
            fx.stop()
