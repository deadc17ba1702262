#!/bin/sh
# One-shot (service temporal-setup, image temporalio/admin-tools): wait until the cluster
# serves, create the namespace, register the job search attributes listed in
# JOBS_SEARCH_ATTRIBUTES as NAME=Type words (docker-compose.yml sets it; tests/test_compose.py
# keeps it equal to workflows/models.py SEARCH_ATTRIBUTES). Safe to re-run: an existing
# namespace is kept and the server skips attributes that already exist.
set -eu

ADDRESS=${TEMPORAL_ADDRESS:-temporal:7233}
NAMESPACE=${TEMPORAL_NAMESPACE:-default}
RETENTION=${TEMPORAL_NAMESPACE_RETENTION:-168h}
: "${JOBS_SEARCH_ATTRIBUTES:?JOBS_SEARCH_ATTRIBUTES is required (NAME=Type ...)}"

attempt=1
until temporal operator cluster health --address "$ADDRESS"; do
  if [ "$attempt" -ge 60 ]; then
    echo "temporal at $ADDRESS is not serving after $attempt attempts" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 2
done

if temporal operator namespace describe --address "$ADDRESS" --namespace "$NAMESPACE" >/dev/null 2>&1; then
  echo "namespace $NAMESPACE already exists"
else
  temporal operator namespace create --address "$ADDRESS" --namespace "$NAMESPACE" \
    --retention "$RETENTION"
fi

for pair in $JOBS_SEARCH_ATTRIBUTES; do
  temporal operator search-attribute create --address "$ADDRESS" --namespace "$NAMESPACE" \
    --name "${pair%%=*}" --type "${pair#*=}"
done

# The server skips a name that already exists whatever its type, so check what is registered:
# a JobRunAt left over as a Keyword would otherwise fail jobs at run time, not here.
listed=$(temporal operator search-attribute list --address "$ADDRESS" --namespace "$NAMESPACE")
for pair in $JOBS_SEARCH_ATTRIBUTES; do
  if ! printf '%s\n' "$listed" | awk -v name="${pair%%=*}" -v type="${pair#*=}" '
    { for (i = 1; i < NF; i++) {
        t = tolower($(i + 1))
        if ($i == name && (t == tolower(type) || t ~ ("_" tolower(type) "$"))) found = 1
    } }
    END { exit !found }'; then
    echo "search attribute ${pair%%=*} is not registered as ${pair#*=} in $NAMESPACE:" >&2
    printf '%s\n' "$listed" >&2
    exit 1
  fi
done

# The frontend validates search attributes against its namespace cache, refreshed every few
# seconds: give it that long before the workers and the API (which wait for this) start.
sleep "${TEMPORAL_SETUP_SETTLE_SECONDS:-10}"
echo "namespace $NAMESPACE is ready: $JOBS_SEARCH_ATTRIBUTES"
