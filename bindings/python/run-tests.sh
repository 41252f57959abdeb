#!/usr/bin/env bash
# The Python bindings' tests: builds and installs the package (`pip install ./bindings/python`,
# maturin: the omr-ffi library in release, its UniFFI module) into a virtual environment of its
# own (target/python-venv), then runs pytest against real omrd processes of the release build.
# Usage: bindings/python/run-tests.sh [BIN_DIR [PYTEST ARGS…]]  (BIN_DIR holds omrd and omr;
# default target/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "${1:-target/release}" && pwd)
shift || true
venv=target/python-venv

python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r bindings/python/requirements-test.txt
# No build isolation: the maturin pinned above builds it, with no other download.
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall \
  --no-deps ./bindings/python
# Tests import the installed package, not the source tree.
cd bindings/python/tests
OMR_BIN_DIR="$bin" "../../../$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
