#!/usr/bin/env bash
# End-to-end smoke test of a portal running against a real cluster: create a sandbox on one
# MIG slice through the REST API, wait until it runs, check its namespace with kubectl, terminate
# it, and check the namespace is gone. Needs curl, kubectl (pointed at the portal's cluster) and
# python3. Exits non-zero, saying why, on the first thing that does not happen.
set -euo pipefail

usage() {
    cat >&2 <<'USAGE'
usage: deploy/smoke.sh PORTAL_URL TOKEN

  PORTAL_URL  the portal's base URL, e.g. https://portal.example.internal
  TOKEN       a personal access token of a member of TEAM (python manage.py create_token USER)

environment (optional):
  TEAM=vision            team to request the sandbox for (its policy must not need approval)
  GPU_TYPE=h100-80gb     GPU type slug (GET /api/v1/gpu-types)
  MIG_PROFILE=1g.10gb    MIG profile of the slice
  TIMEOUT=600            seconds to wait for each step
  KUBECTL_CONTEXT=...    kubectl context of the portal's cluster (default: current context)
USAGE
}

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    usage
    exit 0
fi
if [[ $# -ne 2 ]]; then
    usage
    exit 2
fi

PORTAL_URL=${1%/}
TOKEN=$2
TEAM=${TEAM:-vision}
GPU_TYPE=${GPU_TYPE:-h100-80gb}
MIG_PROFILE=${MIG_PROFILE:-1g.10gb}
TIMEOUT=${TIMEOUT:-600}
KUBECTL=(kubectl)
if [[ -n ${KUBECTL_CONTEXT:-} ]]; then
    KUBECTL+=(--context "$KUBECTL_CONTEXT")
fi
RUN_ID="smoke-$(date +%s)-$$"
SANDBOX_ID=""
TERMINATED=""

say() { printf '[smoke] %s\n' "$*" >&2; }
die() {
    say "FAILED: $*"
    exit 1
}

for tool in curl kubectl python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH"
done

# api METHOD PATH [BODY [IDEMPOTENCY_KEY]]: print the response body; fail on a non-2xx answer.
api() {
    local method=$1 path=$2 body=${3:-} key=${4:-}
    local args=(-sS -X "$method" -H "Authorization: Bearer $TOKEN" -H "Accept: application/json" -w $'\n%{http_code}')
    if [[ -n $body ]]; then
        args+=(-H "Content-Type: application/json" --data "$body")
    fi
    if [[ -n $key ]]; then
        args+=(-H "Idempotency-Key: $key")
    fi
    local out code
    out=$(curl "${args[@]}" "$PORTAL_URL$path") || return 1
    code=${out##*$'\n'}
    out=${out%$'\n'*}
    if [[ $code != 2* ]]; then
        say "$method $path answered HTTP $code: $out"
        return 1
    fi
    printf '%s' "$out"
}

# field NAME: read a JSON object on stdin, print its top-level field NAME (empty for null).
field() {
    python3 -c 'import json, sys; value = json.load(sys.stdin).get(sys.argv[1]); print("" if value is None else value)' "$1"
}

cleanup() {
    if [[ -n $SANDBOX_ID && -z $TERMINATED ]]; then
        say "cleaning up: terminating sandbox $SANDBOX_ID"
        api POST "/api/v1/sandboxes/$SANDBOX_ID/terminate" '{}' >/dev/null || true
    fi
}
trap cleanup EXIT

# wait_for_state STATE...: poll the sandbox until it reaches one of STATE; die on an end state.
wait_for_state() {
    local deadline=$((SECONDS + TIMEOUT)) sandbox state
    while ((SECONDS < deadline)); do
        sandbox=$(api GET "/api/v1/sandboxes/$SANDBOX_ID") || die "cannot read sandbox $SANDBOX_ID"
        state=$(field state <<<"$sandbox")
        for wanted in "$@"; do
            if [[ $state == "$wanted" ]]; then
                printf '%s' "$sandbox"
                return 0
            fi
        done
        case $state in
            failed | rejected | expired | terminated)
                die "sandbox $SANDBOX_ID ended as $state: $(field message <<<"$sandbox")"
                ;;
            pending_approval)
                die "sandbox $SANDBOX_ID waits for a lead's approval; use a TEAM whose policy allows it"
                ;;
        esac
        sleep 5
    done
    die "sandbox $SANDBOX_ID did not reach $* within ${TIMEOUT}s (last state: ${state:-unknown})"
}

say "requesting a $GPU_TYPE $MIG_PROFILE sandbox for team $TEAM at $PORTAL_URL"
body=$(printf '{"name": "%s", "team": "%s", "gpu": {"type": "%s", "mig_profile": "%s"}, "ttl_hours": 1, "purpose": "smoke test"}' \
    "$RUN_ID" "$TEAM" "$GPU_TYPE" "$MIG_PROFILE")
created=$(api POST /api/v1/sandboxes "$body" "$RUN_ID") || die "the portal refused the sandbox request"
SANDBOX_ID=$(field id <<<"$created")
[[ -n $SANDBOX_ID ]] || die "the create answer carries no id: $created"
say "sandbox $SANDBOX_ID is $(field state <<<"$created"); waiting for running"

running=$(wait_for_state running)
say "running; access: $(field access <<<"$running")"

namespace=$("${KUBECTL[@]}" get namespaces -l "gpu-portal/sandbox-id=$SANDBOX_ID" -o jsonpath='{.items[*].metadata.name}')
[[ -n $namespace ]] || die "no namespace labelled gpu-portal/sandbox-id=$SANDBOX_ID in the cluster"
say "namespace $namespace exists"
resource="requests.nvidia.com/mig-$MIG_PROFILE"
slices=$("${KUBECTL[@]}" -n "$namespace" get resourcequota sandbox-quota -o jsonpath="{.spec.hard['${resource//./\\.}']}")
[[ $slices == 1 ]] || die "quota $namespace/sandbox-quota caps $resource at '${slices}', expected 1"
"${KUBECTL[@]}" -n "$namespace" get pod sandbox-0 -o jsonpath='{.status.phase}' | grep -qx Running ||
    die "pod $namespace/sandbox-0 is not Running"
say "quota holds exactly one $MIG_PROFILE slice and the pod is Running"

api POST "/api/v1/sandboxes/$SANDBOX_ID/terminate" '{}' >/dev/null || die "the portal refused to terminate sandbox $SANDBOX_ID"
TERMINATED=yes
wait_for_state terminated >/dev/null
say "sandbox $SANDBOX_ID terminated; waiting for namespace $namespace to go"

deadline=$((SECONDS + TIMEOUT))
while "${KUBECTL[@]}" get namespace "$namespace" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "namespace $namespace still exists ${TIMEOUT}s after termination"
    sleep 5
done
say "namespace $namespace is gone: smoke test passed"
