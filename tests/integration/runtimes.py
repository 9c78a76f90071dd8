"""Language runtimes beyond bookworm's, for the tests: Go 1.26 and 1.27
toolchains and a chroot of Debian unstable (sid) with CPython 3.13-3.15 and
OpenJDK 21 and 25, all provisioned by scripts/runtimes.sh into its cache
(PODPROF_RUNTIMES, default /var/cache/podprof/runtimes; the first call takes
a few minutes, later ones a second). A test that cannot have them (not root,
no mirror, a release gone from sid) is skipped with the script's reason.

    GOROOT = goroot("1.26")
    go_build("1.27", os.path.join(lib.ROOT, "tests", "fixtures", "gohot"), out)
    proc = sid_popen(["python3.14", sid_copy(PYHOT)], stdout=subprocess.PIPE)
    proc.pid  # the host's pid of the python3.14 process: chroot execs it
"""
import atexit
import os
import shutil
import subprocess

import lib
from lib import PROCS, Skip, check

SCRIPT = os.path.join(lib.ROOT, "scripts", "runtimes.sh")
SID_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_answers = {}
_scratch = None


def _script(*args):
    """The script's output for args, once per run (it provisions on the way)."""
    if args not in _answers:
        if os.geteuid() != 0:
            raise Skip("scripts/runtimes.sh needs root")
        r = subprocess.run([SCRIPT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=1800)
        if r.returncode != 0:
            raise Skip("scripts/runtimes.sh %s failed: %s" % (" ".join(args), r.stderr.strip()[-500:]))
        _answers[args] = r.stdout
    return _answers[args]


def goroot(release):
    """GOROOT of the Go toolchain `release` ("1.26")."""
    return _script("go", release).strip()


def go_env(release):
    """The environment go build runs in with that toolchain: GOPATH mode as
    the Makefile's fixtures, no network, no other toolchain, a build cache in
    the runtimes' cache."""
    env = dict(os.environ)
    for line in _script("goenv", release).splitlines():
        k, _, v = line.partition("=")
        env[k] = v
    return env


def go_build(release, pkg_dir, out, cgo=False, flags=()):
    """Builds the Go program in pkg_dir into out with Go `release`; out."""
    env = go_env(release)
    env["CGO_ENABLED"] = "1" if cgo else "0"
    r = subprocess.run([os.path.join(env["GOROOT"], "bin", "go"), "build", "-trimpath", "-buildvcs=false"]
                       + list(flags) + ["-o", os.path.abspath(out), "."],
                       cwd=pkg_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    check(r.returncode == 0, "go %s build of %s failed:\n%s" % (release, pkg_dir, r.stdout[-3000:]))
    return out


def sid():
    """The sid chroot's directory, with /proc mounted in it (the java
    launcher finds itself through it), checked to be this PID namespace's."""
    root = _script("path", "sid").strip()
    check(os.path.ismount(os.path.join(root, "proc")) and
          os.path.exists(os.path.join(root, "proc", str(os.getpid()))),
          "%s/proc is not this PID namespace's /proc" % root)
    return root


def sid_copy(path):
    """Copies a host file into a scratch directory in the chroot (removed at
    exit); returns its path as the chroot sees it."""
    global _scratch
    root = sid()
    if _scratch is None:
        _scratch = "/tmp/podprof-it.%d" % os.getpid()
        os.makedirs(root + _scratch, exist_ok=True)
        atexit.register(shutil.rmtree, root + _scratch, True)
    inner = os.path.join(_scratch, os.path.basename(path))
    shutil.copy(path, root + inner)
    return inner


def sid_popen(argv, env=None, **kw):
    """Popen of argv (paths as the chroot sees them) inside the sid chroot,
    in a clean environment (PATH, HOME, LANG; plus env). chroot(8) execs the
    command, so the Popen's pid is the host pid of the program itself. Killed
    at the end of the test (PROCS)."""
    e = {"PATH": SID_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    e.update(env or {})
    proc = subprocess.Popen(["chroot", sid()] + list(argv), env=e, **kw)
    PROCS.append(proc)
    return proc
