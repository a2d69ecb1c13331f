#!/usr/bin/env bash
# Live checks run inside one kernel-matrix guest (see tests/kernels/run).
#
# Usage: suite.sh KIND OUTDIR
#   KIND    stock | rt | rt-isol: what the guest was booted as, so the
#           checks know what sysinfo must find.
#   OUTDIR  host-visible directory: one NAME.log per check and `summary`
#           (one `pass NAME` / `fail NAME` line each).
# Every check runs the release binary's verbs and asserts on their records
# and outputs. Durations are short: under TCG absolute times mean nothing,
# the checks test behaviour.
set -uo pipefail
kind=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out"
: >"$out/summary"
work=$(mktemp -d /tmp/punctual-kernels.XXXXXX)
# The shared root is 9p without a page cache: every run of a 47 MB binary
# from it reads it again (seconds under TCG). The guest's /tmp is memory.
P=$work/punctual
cp "${PUNCTUAL_BIN:-$root/target/release/punctual}" "$P"
export PUNCTUAL_GUEST_KIND=$kind
# The probed CPU: 1 is the isolated one in the rt-isol guest.
CPU=1
T=/sys/kernel/tracing
[ -d $T/instances ] || mount -t tracefs nodev $T 2>/dev/null
[ -d /sys/kernel/debug/sched ] || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null

fails=0
# check NAME FUNCTION: runs FUNCTION with its output in NAME.log.
check() {
  local name=$1
  shift
  local t0=$SECONDS
  # Not inside an `if`: there bash would ignore set -e in the function.
  (
    set -e
    "$@"
  ) >"$out/$name.log" 2>&1
  if [ $? = 0 ]; then
    echo "pass $name $((SECONDS - t0))s" >>"$out/summary"
    echo "[guest:$kind] pass $name ($((SECONDS - t0))s)"
  else
    fails=$((fails + 1))
    echo "fail $name $((SECONDS - t0))s" >>"$out/summary"
    echo "[guest:$kind] FAIL $name ($((SECONDS - t0))s); its output:"
    sed 's/^/    /' "$out/$name.log"
  fi
}
# jq-style assertion on a JSON file with a message.
assert_json() { # FILE EXPR MESSAGE
  if ! jq -e "$2" "$1" >/dev/null; then
    echo "assertion failed: $3 ($2 on $1)"
    return 1
  fi
}
assert_grep() { # PATTERN FILE MESSAGE
  if ! grep -Eq -- "$1" "$2"; then
    echo "assertion failed: $3 (no /$1/ in $2)"
    return 1
  fi
}
# State that every verb must leave as it found it.
snapshot() {
  {
    ls $T/instances 2>/dev/null | sed 's/^/instance /'
    find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sed 's/^/cgroup /'
    echo "partition $(cat /sys/fs/cgroup/cpuset.cpus.partition 2>/dev/null)"
    echo "subtree $(cat /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null)"
    for f in current_tracer tracing_on buffer_size_kb options/record-cmd trace_clock tracing_thresh; do
      echo "$f $(cat $T/$f 2>/dev/null)"
    done
    # The timerlat/osnoise tracers' settings are global, shared by every
    # instance: --probe timerlat/osnoise journals and restores them.
    for f in $T/osnoise/*; do
      [ -f "$f" ] && echo "osnoise/${f##*/} $(cat "$f" 2>/dev/null)"
    done
    # The tracers' own kernel threads: a timerlat/N or osnoise/N thread
    # that outlived its run keeps waking (FIFO 95) or spinning on its CPU.
    for c in /proc/[0-9]*/comm; do
      read -r kt 2>/dev/null <"$c" || continue
      case $kt in timerlat/* | osnoise/*) echo "kthread $kt" ;; esac
    done
    echo "sched_features $(cat /sys/kernel/debug/sched/features 2>/dev/null)"
    for f in sched_rt_runtime_us sched_rt_period_us; do
      echo "$f $(cat /proc/sys/kernel/$f)"
    done
  } | sed -E 's/^buffer_size_kb [0-9]+ \(expanded: ([0-9]+)\)$/buffer_size_kb \1/' |
    awk '$1 == "buffer_size_kb" { $2 = int(($2 * 1024 + 4079) / 4080) } { print }' | sort
  # A ring buffer never used reads `7 (expanded: N)`; once any instance is
  # used the kernel cannot go back, and punctual writes N back, which the
  # kernel allocates in pages of 4080 data bytes (1408 KB reads 1410):
  # sizes are compared in those pages.
}
same_as_before() { # LABEL
  snapshot >"$work/after"
  if ! diff -u "$work/before" "$work/after"; then
    echo "assertion failed: $1 left the machine changed (diff above)"
    return 1
  fi
}

snapshot >"$work/before"
cp "$work/before" "$out/state-before"

t_sysinfo() {
  $P sysinfo --json "$work/sys.json" | tee "$work/sys.txt"
  local j=$work/sys.json
  case $kind in
    stock)
      assert_json "$j" '.platform.preemption != "rt"' "stock kernel is not PREEMPT_RT"
      assert_json "$j" '.platform.isolcpus == null' "no isolcpus on the stock guest" ;;
    rt | rt-isol)
      assert_json "$j" '.platform.preemption == "rt"' "PREEMPT_RT detected"
      assert_grep '^preemption +rt' "$work/sys.txt" "sysinfo prints the rt model" ;;
  esac
  if [ "$kind" = rt-isol ]; then
    assert_json "$j" '.platform.isolcpus == "1"' "isolcpus=1 detected"
    assert_json "$j" '.platform.nohz_full == "1"' "nohz_full=1 detected"
    assert_json "$j" '.platform.nohz == "full"' "nohz=full"
    assert_json "$j" '[.warnings[].code] | index("no_isolated_cpus") == null' "no isolation warning when CPUs are isolated"
  else
    assert_json "$j" '[.warnings[].code] | index("no_isolated_cpus") != null' "isolation warning without isolcpus"
  fi
  assert_json "$j" '.platform.other.cgroup == "v2"' "cgroup v2 detected"
  assert_grep '^cgroup +v2' "$work/sys.txt" "sysinfo prints cgroup v2"
  assert_json "$j" '.platform.other.hrtick | test("^(on|off)")' "HRTICK state read"
  assert_grep '^hrtick ' "$work/sys.txt" "sysinfo prints the HRTICK state"
  local tracers
  tracers=$(cat $T/available_tracers)
  for t in timerlat osnoise; do
    if [[ " $tracers " == *" $t "* ]]; then
      assert_json "$j" ".platform.other.tracers | split(\" \") | index(\"$t\") != null" "$t listed"
    else
      assert_json "$j" "[.warnings[] | select(.code == \"missing_tracer\") | .tracer] | index(\"$t\") != null" "missing $t explained"
    fi
  done
  if [ "$kind" != stock ]; then
    assert_json "$j" '.platform.other.tracers | test("timerlat") and test("osnoise")' "the RT kernel has timerlat and osnoise"
  fi
  assert_json "$j" '.platform.hypervisor != null' "virtualization detected"
  echo "hypervisor: $(jq -r .platform.hypervisor "$j")"
}
check sysinfo t_sysinfo

t_check() {
  # The verdicts' queue model meets stalls of tens of milliseconds here
  # (TCG): about 100 s under TCG on a 2-core host, most of it verdicts
  # (bench/check-verdict-cost.sh times them on the host). No timeout of its own (punctual stops cleanly on SIGTERM, which would
  # hide it): the guest's timeout bounds it.
  $P check --duration 2s --cpus $CPU --json "$work/check.json" | tee "$work/check.txt"
  test "${PIPESTATUS[0]}" = 0
  assert_json "$work/check.json" '[.series[] | select(.metric == "latency") | .count] | add > 0' "check measured wake-ups"
  assert_grep '^cgroup +v2' "$work/check.txt" "check explains cgroup v2"
  assert_grep '^hrtick +(on|off) \(HRTICK' "$work/check.txt" "check explains HRTICK"
  assert_grep '^tracers +.*nop' "$work/check.txt" "check lists the tracers"
  if [ "$kind" != stock ]; then assert_grep '^preemption +rt$' "$work/check.txt" "check names the rt model"; fi
  same_as_before check
}
check check t_check

t_timer() {
  $P timer --cpus $CPU --duration 2s --json "$work/timer.json"
  assert_json "$work/timer.json" '.series[0].count > 500' "timer took samples"
  assert_json "$work/timer.json" '.series[0].max >= .series[0].min' "ordered"
}
check timer t_timer

t_noise() {
  $P noise --cpus $CPU --duration 2s --json "$work/noise.json"
  assert_json "$work/noise.json" '.series | length > 0' "noise wrote a series"
  same_as_before noise
}
check noise t_noise

# The kernel's own probes: where the tracer exists, its record has the
# probe's series and the machine is left as found; in the rt guest also
# after a Ctrl-C and a SIGKILL (then `cause --cleanup`), and another
# user's timerlat run is refused and left alone. Where the tracer is
# missing, exit status 2 and one sentence saying what to do.
has_tracer() { [[ " $(cat $T/available_tracers) " == *" $1 "* ]]; }
t_missing_tracer() { # VERB TRACER
  local rc=0
  $P "$1" --probe "$2" --cpus $CPU --duration 1s >"$work/$2.out" 2>"$work/$2.err" || rc=$?
  cat "$work/$2.err"
  test "$rc" = 2 || { echo "assertion failed: exit status $rc, not 2"; return 1; }
  assert_grep "kernel's $2 tracer is not available here" "$work/$2.err" "the sentence names the missing tracer"
  test "$(wc -l <"$work/$2.err")" = 1 || { echo "assertion failed: more than one line"; return 1; }
}
t_timerlat() {
  if ! has_tracer timerlat; then
    t_missing_tracer timer timerlat
    return
  fi
  $P timer --probe timerlat --cpus $CPU --interval 1ms --duration 2s --json "$work/tl.json" | tee "$work/tl.txt"
  test "${PIPESTATUS[0]}" = 0
  jq -c '[.series[] | {name, count, min, max}]' "$work/tl.json"
  assert_json "$work/tl.json" '.config.probe == "timerlat"' "the record says the kernel's probe measured"
  assert_json "$work/tl.json" "[.series[] | select(.name == \"cpu$CPU.irq.latency\" and .metric == \"latency\" and .count > 100)] | length == 1" "an IRQ-latency series with samples"
  assert_json "$work/tl.json" "[.series[] | select(.name == \"cpu$CPU.thread.latency\" and .metric == \"latency\" and .count > 100)] | length == 1" "a thread-latency series with samples"
  assert_json "$work/tl.json" '[.series[] | select(.name | endswith(".thread.latency")) | .max >= .min] | all' "ordered"
  same_as_before "timer --probe timerlat"
  # The exit paths are the same code in every RT guest: checked once.
  [ "$kind" = rt ] || return 0
  # Ctrl-C: the run ends early, says so, and puts everything back.
  timeout --foreground -s INT 6 $P timer --probe timerlat --cpus $CPU --duration 60s --json "$work/tl-int.json" || true
  assert_json "$work/tl-int.json" '.interrupted == true' "an interrupted run is marked"
  same_as_before "timer --probe timerlat after Ctrl-C"
  # SIGKILL: the journal lets the next run (here --cleanup) put it back.
  $P timer --probe timerlat --cpus $CPU --duration 60s >/dev/null 2>&1 &
  local pid=$! n=0
  until ls $T/instances | grep -q '^punctual-'; do
    sleep 0.2
    n=$((n + 1))
    [ $n -lt 150 ] || { echo "assertion failed: no instance appeared"; kill -KILL $pid; return 1; }
  done
  sleep 1
  echo "while running: current_tracer $(cat $T/instances/punctual-*/current_tracer) cpus $(cat $T/osnoise/cpus)"
  kill -KILL $pid
  wait $pid || true
  $P cause --cleanup 2>&1
  same_as_before "timer --probe timerlat after SIGKILL and cause --cleanup"
  # Someone else's timerlat run: refused, and left alone.
  mkdir $T/instances/other-user
  echo timerlat >$T/instances/other-user/current_tracer
  local rc=0
  $P timer --probe timerlat --cpus $CPU --duration 1s 2>"$work/busy.err" || rc=$?
  cat "$work/busy.err"
  echo nop >$T/instances/other-user/current_tracer
  rmdir $T/instances/other-user
  test "$rc" = 1 || { echo "assertion failed: a busy tracer gave exit status $rc, not 1"; return 1; }
  assert_grep 'instance other-user is running timerlat' "$work/busy.err" "the refusal names the other user"
  same_as_before "timer --probe timerlat refused"
}
check timer-timerlat t_timerlat

t_osnoise() {
  if ! has_tracer osnoise; then
    t_missing_tracer noise osnoise
    return
  fi
  # --priority does not move osnoise's threads: one warning line says so.
  $P noise --probe osnoise --cpus $CPU --duration 2s --priority 50 --json "$work/on.json" \
    2>"$work/on.err" | tee "$work/on.txt"
  test "${PIPESTATUS[0]}" = 0
  cat "$work/on.err"
  assert_grep '^warning: --priority 50 does not apply to --probe osnoise' "$work/on.err" "a given --priority is said not to apply"
  test "$(grep -c 'does not apply' "$work/on.err")" = 1 || { echo "assertion failed: not one warning line"; return 1; }
  jq -c '{series: [.series[] | {name, count, max}], stolen: [.stolen[] | {cpu, observed_ns, total_ns, intervals, max_ns, sources: (.by_source | length)}], osnoise: .extra.osnoise}' "$work/on.json"
  assert_json "$work/on.json" '.config.probe == "osnoise"' "the record says the kernel's probe measured"
  assert_json "$work/on.json" "[.series[] | select(.name == \"cpu$CPU.gap\" and .metric == \"gap\")] | length == 1" "a gap series for the CPU"
  assert_json "$work/on.json" ".stolen[0].cpu == $CPU and .stolen[0].observed_ns > 0" "observed time from the osnoise summaries"
  assert_json "$work/on.json" ".stolen[0].total_ns <= .stolen[0].observed_ns" "stolen within observed"
  assert_json "$work/on.json" ".extra.osnoise.cpu$CPU.samples > 0" "osnoise summaries read, with interference counts"
  same_as_before "noise --probe osnoise"
  [ "$kind" = rt ] || return 0
  timeout --foreground -s INT 6 $P noise --probe osnoise --cpus $CPU --duration 60s --json "$work/on-int.json" || true
  assert_json "$work/on-int.json" '.interrupted == true' "an interrupted run is marked"
  same_as_before "noise --probe osnoise after Ctrl-C"
}
check noise-osnoise t_osnoise

t_cause() {
  $P cause --cpus $CPU --duration 3s --json "$work/cause.json" 2>&1 | tee "$work/cause.txt"
  test "${PIPESTATUS[0]}" = 0
  if grep -E 'cleanup|could not restore|left' "$work/cause.txt"; then
    echo "assertion failed: cause left state behind"
    return 1
  fi
  same_as_before cause
}
check cause t_cause

# PREEMPT_RT: the threaded handlers stay hidden from a probe above them,
# and preempt one below them, and the hints say which case the run was.
t_cause_rt() {
  $P cause --cpus $CPU --duration 2s --priority 95 >"$work/c95.txt" 2>&1
  assert_grep '^hint: PREEMPT_RT: .*above them' "$work/c95.txt" "FIFO 95 probe: the hint says the irq threads wait for it"
  $P cause --cpus $CPU --duration 3s --priority 40 --load "disk:dir=$out,size=8M,buffered" \
    --json "$work/c40.json" >"$work/c40.txt" 2>&1
  cat "$work/c40.txt"
  assert_grep '^hint: PREEMPT_RT: the probe ran at FIFO 40, not above' "$work/c40.txt" "FIFO 40 probe: the hint says the irq threads preempt it"
  if [ "$kind" = rt ]; then
    # irqaffinity is free here: the 9p disk's interrupt thread runs on CPU 1.
    assert_json "$work/c40.json" '[.. | objects | select(.kind? == "thread" and (.name? // "" | startswith("irq/")))] | length > 0' \
      "an irq/N-name thread is named as a source of a probe below it"
  fi
  echo "sources named below the irq threads:"
  jq -r '.. | objects | select(has("kind") and has("name") and has("total_ns")) | "\(.kind) \(.name) \(.total_ns)"' \
    "$work/c40.json" | sort -u -k1,2 >"$work/c40.sources"
  sed -n 1,30p "$work/c40.sources"
  same_as_before "cause at FIFO 40"
}
[ "$kind" = stock ] || check cause-rt-priorities t_cause_rt

# advise on PREEMPT_RT: a FIFO 99 thread planted on the probed CPU above
# the FIFO 95 probe gets a fix that names it (lowered below the probe),
# and the fix says it takes that thread out.
t_advise_rt() {
  $P check --cpus $CPU --duration 4s --cause \
    --load "cpu:threads=1,policy=fifo,priority=99,cpus=$CPU,duty=5%,period=20ms" \
    --json "$work/adv-c.json" >"$work/adv-c.txt" 2>&1
  $P advise "$work/adv-c.json" --top 5 --json "$work/adv.json" | tee "$work/adv.txt"
  jq -r '.fixes[] | "\(.id) \(.kind) \([.takes_out[]?.name][:3] | join(","))"' "$work/adv.json" | head -20
  assert_json "$work/adv.json" \
    '[.fixes[] | select(.kind == "priority" and ([.takes_out[]? | select(.kind == "thread" and (.name | startswith("pl-")))] | length > 0))] | length > 0' \
    "a priority fix names the planted FIFO 99 load thread and takes it out"
  same_as_before "advise on PREEMPT_RT"
}
[ "$kind" != rt ] || check advise-rt t_advise_rt

t_load() {
  $P load cpu:threads=1 --duration 2s --json "$work/load.json"
  assert_json "$work/load.json" '.load | length > 0' "load section written"
  same_as_before load
}
check load t_load

t_monitor() {
  $P monitor --cpus $CPU --rate 100 --listen off --textfile "$work/mon.prom" --persist-every 1s --duration 3s
  assert_grep 'punctual_' "$work/mon.prom" "monitor wrote metrics"
  same_as_before monitor
}
check monitor t_monitor

# The partition of a running `reserve --cpu` (process PID): its cgroup
# and what its cpuset.cpus.partition and cpuset.cpus.effective read, from
# the first look at a partition root, or as last seen when PID exits first
# (under TCG the run's setup alone can take tens of seconds). A look counts
# only when both files were read: at its end the run removes its cgroup
# (and makes and removes another of the same name to rebuild the root
# domains), and a look whose second read comes after that rmdir finds the
# file gone; with `cat ... || eff=` such a look read as `root` with no
# CPUs. The reads are shell builtins, microseconds apart, where a find and
# two cats from the 9p root could take seconds under TCG.
partition_state() { # OUTFILE PID
  local cg part eff seen="cgroup none"
  while kill -0 "$2" 2>/dev/null; do
    for cg in /sys/fs/cgroup/punctual-rt-*; do
      [ -d "$cg" ] || continue
      read -r part 2>/dev/null <"$cg/cpuset.cpus.partition" || continue
      read -r eff 2>/dev/null <"$cg/cpuset.cpus.effective" || continue
      seen=$(printf 'cgroup %s\npartition %s\neffective %s' "$cg" "$part" "$eff")
      [ "$part" = root ] && break 2
    done
    sleep 0.05
  done
  echo "$seen" >"$1"
  cat "$1"
}
# reserve's own warnings: a setting it could not restore, or deadline
# totals it could not check, is a failure here.
assert_no_reserve_warning() { # OUTPUT LABEL
  if grep -E 'could not|cleanup' "$1"; then
    echo "assertion failed: $2 warned that it could not restore or check (above)"
    return 1
  fi
}
t_reserve() {
  $P reserve --budget 2ms --period 10ms --cpu $CPU --duration 2s --test-app --json "$work/res.json" \
    >"$work/res.txt" 2>&1 &
  local pid=$!
  partition_state "$work/res.part" $pid
  wait $pid
  cat "$work/res.txt"
  assert_grep "^partition root$" "$work/res.part" "the run's cgroup was a v2 partition root"
  assert_grep "^effective $CPU$" "$work/res.part" "the partition held CPU $CPU alone"
  assert_json "$work/res.json" '.kind != null' "reserve wrote a record"
  assert_no_reserve_warning "$work/res.txt" reserve
  same_as_before reserve
}
check reserve t_reserve

# HRTICK switched on for one run through the restore journal; the
# enforcement default follows it (kernel with HRTICK, thread without).
t_reserve_hrtick() {
  $P reserve --budget 2ms --period 10ms --cpu $CPU --duration 1s --test-app --json "$work/hr0.json"
  jq -c '{before: .extra.hrtick_before, during: .extra.hrtick_during, enforce: .config.enforce}' "$work/hr0.json"
  assert_json "$work/hr0.json" '.extra.hrtick_before.state == "off"' "HRTICK off by default"
  $P reserve --budget 2ms --period 10ms --cpu $CPU --duration 1s --test-app --hrtick --json "$work/hr1.json"
  jq -c '{before: .extra.hrtick_before, during: .extra.hrtick_during, enforce: .config.enforce}' "$work/hr1.json"
  assert_json "$work/hr1.json" '.extra.hrtick_during.state == "on"' "HRTICK on during the --hrtick run"
  if jq -e '.config.enforce != null' "$work/hr0.json" >/dev/null; then
    assert_json "$work/hr0.json" '.config.enforce | tostring | test("thread")' "thread enforcement while HRTICK is off"
    assert_json "$work/hr1.json" '.config.enforce | tostring | test("kernel")' "kernel enforcement with HRTICK on"
  fi
  same_as_before "reserve --hrtick"
}
if grep -qw NO_HRTICK_DL /sys/kernel/debug/sched/features 2>/dev/null ||
  grep -qw NO_HRTICK /sys/kernel/debug/sched/features 2>/dev/null; then
  check reserve-hrtick t_reserve_hrtick
fi

t_reserve_kill() {
  $P reserve --budget 2ms --period 10ms --cpu $CPU --duration 30s --test-app &
  local pid=$!
  # Wait until the partition exists, then kill without warning.
  partition_state "$work/kill.part" $pid
  kill -KILL $pid
  wait $pid || true
  assert_grep "^partition root$" "$work/kill.part" "the killed run's cgroup was a v2 partition root"
  assert_grep "^effective $CPU$" "$work/kill.part" "the killed run's partition held CPU $CPU alone"
  $P reserve --cleanup 2>&1 | tee "$work/cleanup.txt"
  test "${PIPESTATUS[0]}" = 0
  same_as_before "reserve after SIGKILL and --cleanup"
  # A second run is admitted: the deadline bandwidth came back.
  $P reserve --budget 2ms --period 10ms --cpu $CPU --duration 1s --test-app --json "$work/res2.json" \
    2>&1 | tee "$work/res2.txt"
  test "${PIPESTATUS[0]}" = 0
  assert_no_reserve_warning "$work/res2.txt" "the second reserve run"
  same_as_before "second reserve run"
}
check reserve-sigkill t_reserve_kill

echo "[guest:$kind] $(grep -c ^pass "$out/summary") passed, $fails failed"
rm -rf "$work"
[ $fails = 0 ]
