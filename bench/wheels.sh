#!/usr/bin/env bash
# The pure-Python wheels a GPU box without a network lacks (Textual and its helpers, the test plugins),
# plus any PACKAGE named, downloaded into .whl/ of this checkout for the box's Python (3.12, x86_64;
# PYTHON_VERSION=3.11 for another). h200_batch.sh and multi_gpu_batch.sh install .whl/ into /tmp/site
# themselves when the box lacks Textual; CuPy, nvidia-ml-py, psutil, rich, numpy, pytest, PyTorch and
# prometheus-client are expected on the box.
# Usage, where there is a network, from anywhere in the checkout: bash bench/wheels.sh [PACKAGE...]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-3.12}" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl \
  "textual>=6.12,<9" mdit-py-plugins linkify-it-py uc-micro-py platformdirs \
  pytest-textual-snapshot syrupy==4.8.0 pytest-asyncio "$@"
echo "on the box, from the checkout: python3 -m pip install -q --no-index --no-deps --no-compile" \
  "--no-cache-dir --upgrade --target /tmp/site .whl/*.whl"
