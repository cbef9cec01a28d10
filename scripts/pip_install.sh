#!/usr/bin/env bash
# pip_install.sh PYTHON ARGS...: `PYTHON -m pip install -q ARGS`, tried up to 3 times.
#
# A fresh machine's install downloads a few hundred MB; one dropped connection should cost a retry,
# not the install. Seen in CI: a wheel stuck at 4.7 of 13.5 MB through all of pip's own resume
# attempts, which a later try gets past. pip also retries connections and resumes partial downloads
# itself, more times than its defaults (older pips ignore the option they do not know).
# PIP_INSTALL_PAUSE sets the seconds between tries (30).
set -uo pipefail
trap 'exit 130' INT TERM  # pip answers Ctrl-C with exit 1, which must not read as a dropped download
python=$1; shift
export PIP_RETRIES=${PIP_RETRIES:-10} PIP_RESUME_RETRIES=${PIP_RESUME_RETRIES:-20}
for try in 1 2 3; do
  "$python" -m pip install -q "$@" && exit 0
  [ "$try" = 3 ] && break
  echo "pip_install.sh: pip install $* failed (try $try of 3); trying again in ${PIP_INSTALL_PAUSE:-30} s" >&2
  sleep "${PIP_INSTALL_PAUSE:-30}"
done
echo "pip_install.sh: pip install $* failed 3 times; pip's last error is above (a network one: check the connection or the package index, then rerun)" >&2
exit 1
