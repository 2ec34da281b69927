#!/usr/bin/env bash
# Browser tests drive Debian's chromium through Playwright; browsers cannot be downloaded here,
# so install the distribution package when it is missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
echo "chromium is missing: installing Debian's chromium package" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "error: chromium is not installed and this user cannot install it (apt-get install chromium)" >&2
    exit 1
  fi
fi
$SUDO apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium >/dev/null
command -v chromium >/dev/null
