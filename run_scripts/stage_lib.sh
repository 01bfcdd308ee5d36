#!/usr/bin/env bash
# Sourced by the multi-stage scripts. `stage NAME OUTPUT COMMAND...` runs one stage unless OUTPUT
# already exists (a rerun after an interruption reuses the finished stages; delete the run folder
# to start over) and appends "NAME<TAB>seconds" (or "reused") to ${timings}.
stage() {
  local name="$1" output="$2"; shift 2
  if [ -e "${output}" ]; then
    echo "=== ${name}: reusing ${output}"
    printf '%s\treused\n' "${name}" >> "${timings}"
    return
  fi
  echo "=== [$(date +%H:%M:%S)] ${name}"
  local start=${SECONDS}
  "$@"
  printf '%s\t%s\n' "${name}" "$((SECONDS - start))" >> "${timings}"
}
