#!/usr/bin/env bash
# The manual pages, with help2man from the program's own help: floodgate.1 from `floodgate --help`
# and floodgate-<subcommand>.1 from `floodgate <subcommand> --help`, for every subcommand that
# `floodgate --help` lists (a new one gets its page without a change here). gzip'd, as Debian wants.
#   packaging/man/make-man.sh BINARY OUTDIR VERSION
# SOURCE_DATE_EPOCH, when set, dates the pages (help2man honours it).
set -euo pipefail
bin="$(realpath "$1")"
out="$2"
version="$3"
here="$(cd "$(dirname "$0")" && pwd)"
command -v help2man >/dev/null || { echo "make-man.sh: help2man is missing (apt-get install help2man)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# help2man runs a program by name: wrappers named as the pages, whose argv[0] is "floodgate" so
# that the usage lines read "floodgate serve [OPTIONS]", not the build directory's path.
wrapper() {  # wrapper NAME SUBCOMMAND…
  local name="$1"; shift
  {
    echo '#!/usr/bin/env bash'
    echo "if [[ \"\${1:-}\" == --version ]]; then echo 'floodgate $version'; exit 0; fi"
    echo "exec -a floodgate '$bin' $* \"\$@\""
  } > "$work/$name"
  chmod +x "$work/$name"
}

subcommands=$("$bin" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && /^  [a-z]/ {print $1}')
[[ -n "$subcommands" ]] || { echo "make-man.sh: no subcommands in floodgate --help" >&2; exit 1; }

see_also() {  # see_also EXCEPT: the other pages, as a help2man include section
  local pages=() p
  for p in floodgate $(printf 'floodgate-%s\n' $subcommands); do
    [[ "$p" == "$1" ]] || pages+=("\\fB$p\\fR(1)")
  done
  printf '[SEE ALSO]\n'
  (IFS=,; echo "${pages[*]}" | sed 's/,/, /g')
  printf '\n\\fBfloodgate.yaml\\fR(5) describes the configuration file; /usr/share/doc/floodgate/ holds the README and the reference (configuration.md, http-api.md, envoy.md, algorithms.md, ...), which describe the configuration, the HTTP API and the Envoy rate-limit service in full.\n'
}

page() {  # page NAME DESCRIPTION [INCLUDE…]
  local name="$1" description="$2"; shift 2
  local includes=(--include "$work/$name.see-also")
  see_also "$name" > "$work/$name.see-also"
  for f in "$@"; do includes+=(--include "$f"); done
  help2man --no-info --section 1 --source "floodgate $version" --manual "User Commands" \
    --version-string "$version" --name "$description" "${includes[@]}" \
    --output "$work/$name.1" "$work/$name"
  gzip -9n < "$work/$name.1" > "$out/$name.1.gz"
}

wrapper floodgate
page floodgate "rate limiting for C++ services, and as a service"
for s in $subcommands; do
  wrapper "floodgate-$s" "$s"
  # The page's one-line description: the subcommand's line in `floodgate --help`, to its first
  # sentence, without what it says in parentheses or a trailing period.
  description=$("$bin" --help | awk -v s="$s" '$1 == s {$1 = ""; sub(/^ +/, ""); print; exit}' \
                | sed -E 's/ \([^)]*\)//g; s/([.;:]) .*$//; s/\.$//')
  extra=()
  [[ -f "$here/floodgate-$s.h2m" ]] && extra+=("$here/floodgate-$s.h2m")
  page "floodgate-$s" "$description" "${extra[@]}"
done
echo "manual pages: $(cd "$out" && ls | tr '\n' ' ')"
