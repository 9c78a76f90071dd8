#!/bin/sh
# The main job: install what is missing, build, start a demo workload (the
# busy fixture: 2 busy threads, 70%/30% split between hot_a and hot_b, plus
# 4 sleepers) and podprof attached to it on 127.0.0.1:8008. Ctrl-C stops both.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
make -j"$(nproc)" all fixtures >&2
LISTEN=${PODPROF_LISTEN:-127.0.0.1:8008}
build/release/fixtures/busy -t 2 -s 4 >/dev/null &
demo=$!
trap 'kill $demo $pp 2>/dev/null; wait 2>/dev/null' INT TERM EXIT
pp=
build/podprof --pid "$demo" --listen "$LISTEN" &
pp=$!
port=${LISTEN##*:}
cat <<TXT

podprof is serving the demo workload (pid $demo) on http://$LISTEN/debug/pprof/

Nothing to install: open the flame graph page in a browser (10 s of CPU, then the page):

  http://127.0.0.1:$port/debug/pprof/profile?seconds=10&format=flamegraph

or the index, which links every profile and its flame graph: http://127.0.0.1:$port/debug/pprof/

With Go (go tool pprof, go tool trace) or curl, in another terminal:

  go tool pprof -top http://127.0.0.1:$port/debug/pprof/profile?seconds=5
  go tool pprof http://127.0.0.1:$port            # 30 s CPU profile, interactive
  go tool pprof -http=:8080 http://127.0.0.1:$port/debug/pprof/profile?seconds=10
  curl http://127.0.0.1:$port/debug/pprof/        # index, with the target's pid, threads, RSS
  curl -s 'http://127.0.0.1:$port/debug/pprof/goroutine?debug=2'   # every thread's stack now
  go tool pprof -top http://127.0.0.1:$port/debug/pprof/heap        # memory by mapping
  go tool pprof -top 'http://127.0.0.1:$port/debug/pprof/block?seconds=5'   # where threads wait
  wget -O 'trace?seconds=5' 'http://127.0.0.1:$port/debug/pprof/trace?seconds=5' && go tool trace 'trace?seconds=5'
  curl -s http://127.0.0.1:$port/debug/pprof/cmdline | tr '\\0' ' '

Ctrl-C stops podprof and the demo.
TXT
wait $pp
