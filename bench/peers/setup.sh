#!/usr/bin/env bash
# Idempotent install of everything the peer benchmarks need (run as root for apt, or with the
# Debian packages already present).
#   - Debian packages (apt): redis-server, redis-tools, nginx, wrk, python3-redis, Guava and a JDK,
#     Node.js and npm, and python3-limits unless LIMITS_SRC names a source tree of Python `limits`
#   - npm packages (pinned) into $WORK/node (default /tmp/floodgate-peers/node, outside the clone)
#   - a tiny Java harness for Guava's RateLimiter, compiled into $WORK/java
# Safe to re-run: each step checks whether it is already done.
#   usage: bench/peers/setup.sh        env: see lib.sh (PEERS_WORK, LIMITS_SRC, PEERS_PYTHON, GUAVA_JAR)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/lib.sh"

APT_PKGS=(redis-server redis-tools nginx wrk python3-redis python3-deprecated
          python3-packaging python3-typing-extensions libguava-java default-jdk-headless
          nodejs npm)
[ -n "$LIMITS_SRC" ] || APT_PKGS+=(python3-limits)
NPM_PKGS=(rate-limiter-flexible@11.4.0 ioredis@6.0.0 bottleneck@2.19.5 limiter@4.1.0)

log() { echo "[setup] $*" >&2; }

# ---- 1. apt ---------------------------------------------------------------
missing=()
for p in "${APT_PKGS[@]}"; do
  # nodejs/npm/jdk may come from elsewhere on the machine: accept the binaries too
  case "$p" in
    nodejs) command -v node >/dev/null && continue ;;
    npm) command -v npm >/dev/null && continue ;;
    default-jdk-headless) command -v javac >/dev/null && continue ;;
    nginx) { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; } && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "ERROR: missing Debian packages; as root: apt-get install --no-install-recommends ${missing[*]}"
    exit 1
  fi
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Do not let package scripts start system-wide daemons (redis on 6379, nginx on 80):
  # the benchmarks start their own instances on their own loopback ports.
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; created_policy=1
  fi
  apt-get update -qq || true
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
else
  log "apt packages present"
fi

# ---- 2. npm ---------------------------------------------------------------
mkdir -p "$NODE_DIR"
want="$(printf '%s\n' "${NPM_PKGS[@]}")"
if [ -f "$NODE_DIR/.installed" ] && [ "$(cat "$NODE_DIR/.installed")" = "$want" ] \
   && [ -d "$NODE_DIR/node_modules/rate-limiter-flexible" ]; then
  log "npm packages present"
else
  log "npm install ${NPM_PKGS[*]} (into $NODE_DIR)"
  [ -f "$NODE_DIR/package.json" ] || echo '{"name":"peers-bench","private":true}' > "$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --save-exact --loglevel=error "${NPM_PKGS[@]}" >/dev/null)
  echo "$want" > "$NODE_DIR/.installed"
fi

# ---- 3. Python limits ---------------------------------------------------------
if [ -n "$LIMITS_SRC" ] && [ ! -d "$LIMITS_SRC/limits" ]; then
  log "ERROR: LIMITS_SRC=$LIMITS_SRC holds no limits/ package"; exit 1
fi
"$PY" "$HERE/py_limits.py" --describe | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
import redis
print("[setup] python limits %s (%s, from %s), redis-py %s; skipped: %s" % (
    d["version"], d["path"], d["from"], redis.__version__, d["skipped"]))' >&2

# ---- 4. Java harness (Guava) ---------------------------------------------------
mkdir -p "$JAVA_DIR"
if [ ! -f "$JAVA_DIR/GuavaBench.class" ] || [ "$HERE/GuavaBench.java" -nt "$JAVA_DIR/GuavaBench.class" ]; then
  log "javac GuavaBench.java"
  javac -nowarn -cp "$GUAVA_JAR" -d "$JAVA_DIR" "$HERE/GuavaBench.java" 2>&1 | grep -v '^Note:' >&2 || true
fi
[ -f "$JAVA_DIR/GuavaBench.class" ] || { log "ERROR: GuavaBench did not compile"; exit 1; }

# ---- 5. report ---------------------------------------------------------------
log "ok: $(redis-server --version | cut -d' ' -f3), $(nginx -v 2>&1 | cut -d' ' -f3), $(wrk -v 2>&1 | head -1 | cut -d' ' -f2), node $(node --version), $(java -version 2>&1 | head -1)"
touch "$WORK/.setup-done"
