# shellcheck shell=bash
# shellcheck disable=SC2034  # STOP_STATUS, SERVICE_PID, TEE_PID are read by the sourcing script
# Sourced by scripts/run-local.sh (`make run`) and scripts/run-ha.sh (`make run-ha`): how the local
# stacks start a service with its output on the terminal and in a log file, and how they say why
# one ended.
#
# A terminal's Ctrl-C (and a hangup) goes to the whole foreground process group: the script and
# the `tee`s copying the services' output (the services run in sessions of their own, so the
# script can stop them in order). A tee that died of it left the service writing into a closed
# pipe, and the control plane died of SIGPIPE before its shutdown ran (issue 40). So each tee
# ignores INT, HUP, QUIT and TERM and ends when its service closes the pipe: the shutdown's last
# lines reach the terminal and the log file. `tee -p` keeps writing the file when the terminal
# side is a closed pipe (`make run | head`).

# start_service NAME LOGFILE COMMAND...: starts COMMAND in a session of its own, its stdout and
# stderr appended to LOGFILE and copied to our stdout. Sets SERVICE_PID[NAME] and TEE_PID[NAME]
# (declare -A both first). Only the service holds the pipe: services started later do not
# inherit it, so its tee ends with it.
start_service() {
  local name=$1 logfile=$2 fd
  shift 2
  exec {fd}> >(trap '' INT HUP QUIT TERM; exec tee -p -a "$logfile")
  TEE_PID["$name"]=$!
  setsid "$@" >&"$fd" 2>&1 &
  SERVICE_PID["$name"]=$!
  exec {fd}>&-
}

# describe_exit STATUS: "exited with code N" or "was killed by signal N (SIGNAME)", from the
# status `wait` gave (128+N for a signal).
describe_exit() {
  local status=$1
  if [ "$status" -gt 128 ] && [ "$status" -lt 193 ]; then
    echo "was killed by signal $((status - 128)) (SIG$(kill -l "$((status - 128))"))"
  else
    echo "exited with code $status"
  fi
}

# report_exit PREFIX WHAT NAME LOGFILE [STATUS]: waits for service NAME (already exited, or
# exiting; STATUS when a `wait -n` took it already) and prints to stderr how it ended and the last
# lines of its log, e.g.
#   run-local: the node agent exited with code 1; its last lines (.../agent.log):
report_exit() {
  local prefix=$1 what=$2 name=$3 logfile=$4 status=${5:-}
  if [ -z "$status" ]; then
    status=0
    wait "${SERVICE_PID[$name]}" 2>/dev/null || status=$?
  fi
  wait_for_tees "$name"  # the service's last lines are in the file before we quote them
  echo "$prefix: the $what $(describe_exit "$status"); its last lines ($logfile):" >&2
  tail -n 5 "$logfile" 2>/dev/null | sed 's/^/    /' >&2
}

# stop_service NAME TENTHS: SIGTERM, then SIGKILL after TENTHS tenths of a second. Sets
# STOP_STATUS to how it ended (wait's status; "" when it was not running).
stop_service() {
  local name=$1 tenths=$2 pid=${SERVICE_PID[$1]:-}
  STOP_STATUS=""
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 "$tenths"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  STOP_STATUS=0
  wait "$pid" 2>/dev/null || STOP_STATUS=$?
}

# wait_for_tees [NAME...]: until the tees of these services (default: all) have copied their
# service's last lines (at most 5 s each; a tee ends once its service and the service's children
# closed the pipe).
wait_for_tees() {
  local name
  [ $# -gt 0 ] || set -- "${!TEE_PID[@]}"
  for name in "$@"; do
    for _ in $(seq 1 50); do kill -0 "${TEE_PID[$name]}" 2>/dev/null || break; sleep 0.1; done
  done
}

# stop_orphaned_plugins PREFIX AGENT_DATA_DIR: a plugin process that an agent which died (kill -9,
# a crash) left running, named by its launch record (AGENT_DATA_DIR/plugins/ID[/controller]/process:
# "<pid> <start ticks>"; the ticks tell it from a process that reused the pid), stopped as the
# next agent would stop it: SIGTERM to its process group, SIGKILL after 5 s. A stack that stops
# must not leave it running.
stop_orphaned_plugins() {
  local prefix=$1 record pid ticks
  for record in "$2"/plugins/*/process "$2"/plugins/*/*/process; do
    [ -f "$record" ] || continue
    read -r pid ticks < "$record" || continue
    [ -n "$pid" ] || continue
    [ "$(awk '{print $22}' "/proc/$pid/stat" 2>/dev/null)" = "$ticks" ] || continue
    echo "$prefix: stopping plugin process $pid, left running by the agent" >&2
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
}
