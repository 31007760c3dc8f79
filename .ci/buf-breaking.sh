#!/usr/bin/env bash
# buf breaking for api/ (the gRPC API), against what main had:
#   - on a branch: the merge base with main, so only this branch's changes
#     count;
#   - on main itself (CI's clean clone): the first parent, the main before
#     the last merge;
#   - IDGEN_BUF_BASE=<git ref> overrides both.
# A deliberate break is accepted by a line of api/buf-breaking-allow.txt,
# "RULE<TAB>text": a violation of buf rule RULE whose message contains
# text passes. Such a line goes with a CHANGELOG entry that says what
# breaks for clients, and is removed once main holds the change (the next
# comparison no longer reports it). Usage: .ci/buf-breaking.sh BUF_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
buf="$1"
if [ -n "${IDGEN_BUF_BASE:-}" ]; then
  base="$IDGEN_BUF_BASE"
elif [ -s api/buf-breaking-base ] && git cat-file -e "$(cat api/buf-breaking-base)^{commit}" 2>/dev/null; then
  # The API as it last landed on main (or was released): every change
  # since, not only the last commit's, is checked.
  base=$(cat api/buf-breaking-base)
elif git rev-parse -q --verify main >/dev/null && [ "$(git rev-parse HEAD)" != "$(git rev-parse main)" ]; then
  base=$(git merge-base HEAD main)
elif git rev-parse -q --verify HEAD^ >/dev/null; then
  base=HEAD^
else
  echo "buf breaking: no earlier commit to compare with (shallow clone?); skipped"
  exit 0
fi
if ! git cat-file -e "$base:api/buf.yaml" 2>/dev/null; then
  echo "buf breaking: $base has no api/buf.yaml; nothing to compare with"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$base" api | tar -x -C "$tmp"
echo "buf breaking: api/ against $(git rev-parse --short "$base")"
set +e
out=$(cd api && "$buf" breaking --against "$tmp/api" --error-format json)
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
  echo "no breaking change"
  exit 0
fi
if [ -z "$out" ]; then
  echo "buf breaking failed (exit $rc) without a finding"; exit "$rc"
fi
allow=api/buf-breaking-allow.txt
failed=0
while IFS= read -r line; do
  [ -z "$line" ] && continue
  rule=$(printf '%s' "$line" | sed -n 's/.*"type":"\([^"]*\)".*/\1/p')
  plain=${line//\\\"/\"} # the message as buf prints it in text, quotes unescaped
  ok=""
  if [ -f "$allow" ]; then
    while IFS=$'\t' read -r arule atext; do
      case "$arule" in ''|'#'*) continue ;; esac
      if [ "$arule" = "$rule" ] && [[ "$plain" == *"$atext"* ]]; then ok=1; break; fi
    done < "$allow"
  fi
  if [ -n "$ok" ]; then
    echo "accepted by $allow: $line"
  else
    echo "BREAKING: $line"; failed=1
  fi
done <<< "$out"
if [ "$failed" -ne 0 ]; then
  echo "buf breaking: a change above breaks gRPC clients; if it is deliberate, add \"RULE<TAB>text\" to $allow and note it in CHANGELOG.md"
  exit 1
fi
