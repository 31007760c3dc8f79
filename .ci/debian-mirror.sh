#!/usr/bin/env bash
# .ci/debian-mirror.sh SUITE [ROOT]: print the first Debian mirror that the
# apt sources under ROOT (default: this machine, /) name for SUITE, for
# debootstrap in .ci/docker-images.sh. A CI machine may reach only the
# mirror it is configured with, so there is no built-in fallback address:
# with no such source it says what it read and exits 1.
#
# Read in apt's order: /etc/apt/sources.list, then /etc/apt/sources.list.d/
# by name, both formats: one-line *.list ("deb [opts] URI SUITE COMP...")
# and deb822 *.sources stanzas (Types/URIs/Suites/Enabled, the format of
# Debian 12's debian.sources). A source counts when it is of type deb (not
# deb-src), enabled, lists SUITE itself (not SUITE-security or
# SUITE-updates, which are not full archives), and its URI is http(s) or
# file, which debootstrap can fetch from.
set -euo pipefail

suite=${1:?usage: debian-mirror.sh SUITE [ROOT]}
root=${2:-}
root=${root%/}

files=()
[ ! -f "$root/etc/apt/sources.list" ] || files+=("$root/etc/apt/sources.list")
for f in "$root"/etc/apt/sources.list.d/*; do
	case $f in
	*.list | *.sources) [ ! -f "$f" ] || files+=("$f") ;;
	esac
done

one_line() {
	awk -v suite="$suite" '
		{ sub(/#.*/, "") }
		$1 == "deb" {
			line = $0
			sub(/^[ \t]*deb[ \t]+/, "", line)
			if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)
			split(line, f, /[ \t]+/)
			if (f[2] == suite && f[1] ~ /^(https?|file):/) { print f[1]; exit }
		}' "$1"
}

deb822() {
	awk -v suite="$suite" '
		function flush(  i) {
			if (types ~ / deb / && enabled != "no" && suites ~ (" " suite " "))
				for (i = 1; i <= n; i++)
					if (u[i] ~ /^(https?|file):/) { print u[i]; found = 1; exit }
			types = " "; suites = " "; enabled = ""; field = ""; n = 0
		}
		# add VALUE to the field being read (values may continue on
		# lines that start with white space).
		function add(value,  v, k, i) {
			k = split(value, v, /[ \t]+/)
			for (i = 1; i <= k; i++) {
				if (v[i] == "") continue
				if (field == "types") types = types v[i] " "
				else if (field == "suites") suites = suites v[i] " "
				else if (field == "uris") u[++n] = v[i]
				else if (field == "enabled") enabled = tolower(v[i])
			}
		}
		BEGIN { types = " "; suites = " " }
		/^#/ { next }
		/^[ \t]*$/ { flush(); next }
		/^[ \t]/ { add($0); next }
		{
			c = index($0, ":")
			if (c == 0) { field = ""; next }
			field = tolower(substr($0, 1, c - 1))
			add(substr($0, c + 1))
		}
		END { if (!found) flush() }' "$1"
}

for f in ${files[@]+"${files[@]}"}; do
	case $f in
	*.sources) uri=$(deb822 "$f") ;;
	*) uri=$(one_line "$f") ;;
	esac
	if [ -n "$uri" ]; then
		printf '%s\n' "$uri"
		exit 0
	fi
done

{
	echo "debian-mirror.sh: no apt source for the Debian suite '$suite' in $root/etc/apt/sources.list or $root/etc/apt/sources.list.d/*.{list,sources}"
	if [ ${#files[@]} -gt 0 ]; then
		echo "  read: ${files[*]}"
	fi
	echo "  debootstrap needs a mirror that serves '$suite' itself (not $suite-security or $suite-updates)."
	echo "  Add one, e.g. 'deb http://MIRROR/debian $suite main' in /etc/apt/sources.list,"
	echo "  or name it in IDGEN_DEBIAN_MIRROR."
} >&2
exit 1
