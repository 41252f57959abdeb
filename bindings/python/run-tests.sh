#!/usr/bin/env bash
# The Python bindings' tests: builds the package's wheel (as `pip install ./bindings/python`
# builds it: maturin, the omr-ffi library in release, its UniFFI module), installs it into a
# virtual environment of its own (target/python-venv), then runs pytest against real omrd
# processes of the release build.
# Usage: bindings/python/run-tests.sh [BIN_DIR [PYTEST ARGS…]]  (BIN_DIR holds omrd and omr;
# default target/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "${1:-target/release}" && pwd)
shift || true
venv=target/python-venv

python3 -m venv "$venv"
# maturin's build backend runs the `maturin` command by name: the venv's, not any other.
export PATH="$PWD/$venv/bin:$PATH"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r bindings/python/requirements-test.txt
# A wheel, built as `pip install ./bindings/python` builds the package (no build isolation: the
# maturin pinned above builds it, with no other download), then installed.
rm -rf target/python-wheels
"$venv/bin/pip" wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  -w target/python-wheels ./bindings/python
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps \
  target/python-wheels/omr-*.whl
# Tests import the installed package, not the source tree.
cd bindings/python/tests
OMR_BIN_DIR="$bin" "../../../$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
