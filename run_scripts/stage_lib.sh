#!/usr/bin/env bash
# Sourced by the multi-stage scripts. `stage NAME OUTPUT COMMAND...` runs one stage unless it
# finished before: OUTPUT exists and the stage left its marker (stage_done/NAME beside
# ${timings}) after its command succeeded, so a stage killed half-way (e.g. an evaluation that
# had written some rows) runs again. A rerun after an interruption thus reuses the finished
# stages; delete the run folder to start over. Prints a start line and a line with the stage's
# and the script's elapsed seconds. Appends "NAME<TAB>seconds" to ${timings}; a
# reused stage repeats the seconds its marker recorded ("?" for markers from before markers held
# them), marked "(reused)", so a resumed run's timings still cover every stage.
stage() {
  local name="$1" output="$2"; shift 2
  local done_dir
  done_dir="$(dirname "${timings}")/stage_done"
  if [ -e "${output}" ] && [ -e "${done_dir}/${name}" ]; then
    echo "=== ${name}: reusing ${output}"
    local seconds
    seconds="$(cat "${done_dir}/${name}")"
    printf '%s\t%s (reused)\n' "${name}" "${seconds:-?}" >> "${timings}"
    return
  fi
  echo "=== [$(date +%H:%M:%S)] ${name}"
  local start=${SECONDS}
  "$@"
  mkdir -p "${done_dir}"
  local elapsed=$((SECONDS - start))
  echo "${elapsed}" > "${done_dir}/${name}"
  printf '%s\t%s\n' "${name}" "${elapsed}" >> "${timings}"
  echo "--- ${name} done in ${elapsed} s (script running for ${SECONDS} s)"
}

# `write_command FILE COMMAND_LINE [NOTE...]`: what made a results folder and at which commit,
# each NOTE as a further comment line.
write_command() {
  local file="$1" command_line="$2"; shift 2
  {
    echo "# produced by:"
    echo "${command_line}"
    echo "# commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    local note
    for note in "$@"; do echo "# ${note}"; done
  } > "${file}"
}
