#!/usr/bin/env bash
# Fuzz `crabrec serve`'s HTTP API from its own OpenAPI schema with schemathesis, from outside the project.
#   bash scripts/fuzz_api.sh RUN [EXAMPLES] [VENV]     e.g. bash scripts/fuzz_api.sh runs/office-quick 3000
# schemathesis is not a dependency of crabrec: it lives in a throw-away virtual environment (default .venv-fuzz).
# The server serves every method of RUN on a free loopback port. Every check runs but "a request the schema allows is
# accepted": the schema cannot know the catalogue's item ids, the data's users or each method's beam width, which the
# server refuses with a 422. What is checked: no 5xx, every answer matches the schema, its status code and content type
# are declared, requests the schema forbids are refused, a 405 names the allowed methods.
set -euo pipefail
run="${1:?usage: bash scripts/fuzz_api.sh RUN [EXAMPLES] [VENV]}"
examples="${2:-1000}"
venv="${3:-.venv-fuzz}"
crabrec="${CRABREC:-.venv/bin/crabrec}"
[ -x "$venv/bin/schemathesis" ] || {
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "schemathesis>=4,<5"
}
log="$(mktemp)"
"$crabrec" serve "$run" --port 0 >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do  # the start-up line names the port once the socket listens
    url="$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true)"
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$log" >&2; exit 2; }
    sleep 0.5
done
[ -n "$url" ] || { echo "fuzz_api: the server did not start" >&2; exit 2; }
"$venv/bin/schemathesis" run "$url/openapi.json" --max-examples "$examples" --workers 2 \
    --exclude-checks positive_data_acceptance
errors="$(grep -c '" 5[0-9][0-9] ' "$log" || true)"
echo "server log: $(grep -c '" [0-9][0-9][0-9] ' "$log" || true) requests, $errors answered 5xx"
[ "$errors" = 0 ]
