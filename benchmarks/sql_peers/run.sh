#!/usr/bin/env bash
# dpml side by side with Tumult Analytics, PipelineDP and SmartNoise SQL on the TPC-H DP queries
# of benchmarks/sql/ (see README.md here). Makes one virtual environment per system (their pins
# conflict: Tumult needs pandas < 2) under --venv, installs the pinned versions from PyPI once,
# then runs driver.py.
#
#   benchmarks/sql_peers/run.sh --data DIR [--scale-factor SF] [--runs R] [--dpml PATH]
#       [--json OUT] [--venv DIR] [--peers tumult,pipelinedp,smartnoise] [--queries q1,q3,...]
#
# DIR holds one Parquet file per TPC-H table (customer.parquet, ...) and the DP schema
# schema.toml (benchmarks/sql/tpch.toml), as `dpml bench sql` writes them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/target/sql-peers-venv"
dpml="$root/target/release/dpml"
python="${PYTHON:-python3}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv="$2"; shift 2 ;;
    --dpml) dpml="$2"; shift 2 ;;
    --data|--runs|--json|--scale-factor|--peers|--queries|--epsilon|--delta|--timeout|--max-seconds)
      [ $# -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$dpml" ] || { echo "error: no dpml binary at '$dpml' (build it or pass --dpml PATH)" >&2; exit 2; }
mkdir -p "$venv"
venv="$(cd "$venv" && pwd)"

# One environment per system; a peer that cannot be installed is reported in the table.
for env in driver tumult pipelinedp smartnoise; do
  if [ ! -f "$venv/$env/.installed" ]; then
    echo "installing $env into $venv/$env (log: $venv/$env.install.log)" >&2
    rm -rf "$venv/$env"
    if "$python" -m venv "$venv/$env" > "$venv/$env.install.log" 2>&1 \
      && "$venv/$env/bin/pip" install -r "$here/requirements-$env.txt" >> "$venv/$env.install.log" 2>&1; then
      touch "$venv/$env/.installed"
    else
      echo "warning: $env could not be installed (see $venv/$env.install.log)" >&2
      rm -rf "$venv/$env"
      [ "$env" = driver ] && { echo "error: the driver's environment is needed" >&2; exit 1; }
    fi
  fi
done
exec "$venv/driver/bin/python" "$here/driver.py" --dpml "$dpml" --venv "$venv" "${args[@]}"
